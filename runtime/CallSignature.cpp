#include "runtime/CallSignature.h"

#include <fmt/format.h>

#include <algorithm>

#include "runtime/Communicator.h"

namespace meshflow::runtime {

std::string OperandType::text() const {
  return allocated ? ir::dtypeName(dtype) + shapeText(shape) : "unallocated";
}

std::size_t OperandType::bytes() const {
  return allocated ? static_cast<std::size_t>(shapeElements(shape)) * ir::dtypeBytes(dtype) : 0;
}

std::string CallSignature::describe(std::uint64_t number) const {
  std::string text = fmt::format("{} #{} over group {}", op, number, groupText(group));
  if (root >= 0) text += fmt::format(" (root device {})", root);
  return text;
}

std::string CallSignature::plain() const { return fmt::format("{} over group {}", op, groupText(group)); }

namespace {

std::string operandName(const CallSignature& call, std::size_t index) {
  return call.operands.size() == 1 && call.op != "allReduce" ? "the input"
                                                             : fmt::format("tensor {}", index);
}

// "1 tensor", "2 tensors".
std::string tensorCount(const CallSignature& call) {
  std::size_t n = call.operands.size();
  return fmt::format("{} tensor{}", n, n == 1 ? "" : "s");
}

}  // namespace

CallSignature checkedCall(std::string op, const std::vector<int>& group, int device, int devices) {
  CallSignature call;
  call.op = std::move(op);
  call.group = group;
  auto usage = [&](std::string detail) {
    return CommError(CommError::Kind::Usage, device, std::move(detail));
  };
  std::vector<bool> listed(static_cast<std::size_t>(std::max(devices, 0)), false);
  for (int member : group) {
    if (member < 0 || member >= devices)
      throw usage(fmt::format("{}: there is no device {} (the cluster has {})", call.plain(), member,
                              devices));
    if (listed[static_cast<std::size_t>(member)])
      throw usage(fmt::format("{}: device {} is listed twice", call.plain(), member));
    listed[static_cast<std::size_t>(member)] = true;
  }
  if (device < 0 || device >= devices || !listed[static_cast<std::size_t>(device)])
    throw usage(fmt::format("{}: device {} is not a member", call.plain(), device));
  return call;
}

CallSignature slicedInputCall(std::string op, const std::vector<int>& group, int device, int devices,
                              const Tensor& input, std::size_t parts) {
  CallSignature call = checkedCall(std::move(op), group, device, devices);
  auto usage = [&](std::string detail) {
    return CommError(CommError::Kind::Usage, device, call.plain() + ": " + detail);
  };
  if (!input.allocated()) throw usage("the input is unallocated");
  if (input.rank() == 0) throw usage(fmt::format("the input {} has no axis 0", input.typeText()));
  if (input.dim(0) % static_cast<std::int64_t>(parts) != 0)
    throw usage(fmt::format("dim 0 of {} does not split into {} equal slices", input.typeText(), parts));
  call.operands.push_back(OperandType::of(input));
  return call;
}

std::optional<std::string> callDifference(int a, const CallSignature& x, int b, const CallSignature& y) {
  if (x.op != y.op) return fmt::format("device {} called {} but device {} {}", a, x.op, b, y.op);
  if (x.group != y.group)
    return fmt::format("device {} gave the group as {} but device {} as {}", a, groupText(x.group),
                       b, groupText(y.group));
  if (x.root != y.root)
    return fmt::format("device {} named root device {} but device {} root device {}", a, x.root, b,
                       y.root);
  if (!x.operandsAgree) return std::nullopt;
  if (x.operands.size() != y.operands.size())
    return fmt::format("device {} passed {} but device {} {}", a, tensorCount(x), b,
                       tensorCount(y));
  for (std::size_t i = 0; i < x.operands.size(); ++i)
    if (x.operands[i] != y.operands[i])
      return fmt::format("{} is {} on device {} but {} on device {}", operandName(x, i),
                         x.operands[i].text(), a, y.operands[i].text(), b);
  return std::nullopt;
}

}  // namespace meshflow::runtime
