#include "runtime/cpu/KernelCollectives.h"

#include "runtime/KernelBackend.h"

namespace meshflow::runtime::cpu {
namespace {

ir::Op opOf(ir::OpKind kind, ir::Attributes attrs = {}) {
  ir::Op op;
  op.kind = kind;
  op.attrs = std::move(attrs);
  return op;
}

// y = ((x0 + x1) + x2) + ..., the first addition into a new tensor, the rest in place.
Tensor addInOrder(const std::vector<const Tensor*>& terms) {
  if (terms.size() == 1) return *terms[0];  // shared until written, as the host path's copy
  const ir::Op add = opOf(ir::OpKind::Add);
  Tensor sum;
  std::vector<Tensor*> out{&sum};
  runtime::runKernel(add, {terms[0], terms[1]}, out, {});
  for (std::size_t k = 2; k < terms.size(); ++k) runtime::runKernel(add, {&sum, terms[k]}, out, {});
  return sum;
}

// Every input's `parts` slices along axis 0.
std::vector<std::vector<Tensor>> slicesOf(const std::vector<const Tensor*>& inputs, std::size_t parts) {
  const ir::Op split = opOf(ir::OpKind::Split, {{"axis", std::int64_t{0}}});
  std::vector<std::vector<Tensor>> slices(inputs.size(), std::vector<Tensor>(parts));
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    std::vector<Tensor*> out;
    for (Tensor& t : slices[k]) out.push_back(&t);
    runtime::runKernel(split, {inputs[k]}, out, {});
  }
  return slices;
}

// Slice `part` of each input.
std::vector<Tensor> partOf(const std::vector<const Tensor*>& inputs, std::size_t part, std::size_t parts) {
  std::vector<Tensor> picked;
  for (auto& slices : slicesOf(inputs, parts)) picked.push_back(std::move(slices[part]));
  return picked;
}

std::vector<const Tensor*> pointers(const std::vector<Tensor>& tensors) {
  std::vector<const Tensor*> p;
  for (const Tensor& t : tensors) p.push_back(&t);
  return p;
}

}  // namespace

bool collectivesOnKernels(const std::vector<const Tensor*>& inputs) {
  if (!KernelScope::current() || inputs.empty()) return false;
  const ir::DType dtype = inputs[0]->dtype();
  return dtype == ir::DType::F32 || dtype == ir::DType::F16 || dtype == ir::DType::BF16;
}

// Each collective's ops have run when it returns, even inside a KernelBatch:
// they read the other members' tensors, which those may free (their blocks
// then reused by their own next ops) as soon as the collective is over.
Tensor kernelSum(const std::vector<const Tensor*>& inputs) {
  Tensor sum = addInOrder(inputs);
  settleKernels();
  return sum;
}

Tensor kernelSliceSum(const std::vector<const Tensor*>& inputs, std::size_t part, std::size_t parts) {
  const std::vector<Tensor> picked = partOf(inputs, part, parts);
  Tensor sum = addInOrder(pointers(picked));
  settleKernels();
  return sum;
}

Tensor kernelConcat(const std::vector<const Tensor*>& inputs) {
  Tensor y;
  std::vector<Tensor*> out{&y};
  runtime::runKernel(opOf(ir::OpKind::Concat, {{"axis", std::int64_t{0}}}), inputs, out, {});
  settleKernels();
  return y;
}

Tensor kernelExchange(const std::vector<const Tensor*>& inputs, std::size_t part, std::size_t parts) {
  const std::vector<Tensor> picked = partOf(inputs, part, parts);
  return kernelConcat(pointers(picked));
}

}  // namespace meshflow::runtime::cpu
