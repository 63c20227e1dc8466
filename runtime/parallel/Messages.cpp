#include "runtime/parallel/Messages.h"

#include <stdexcept>

namespace meshflow::runtime {
namespace {

[[noreturn]] void malformed() { throw std::runtime_error("a malformed message arrived"); }

ir::MeshAxes axesOf(std::int32_t code) {
  if (code < 0 || code > 3) malformed();
  return static_cast<ir::MeshAxes>(code);
}

}  // namespace

std::vector<Tensor> encodeMessage(ValueTable&& bundle, const HeldSpecs& held) {
  std::vector<std::int32_t> ids, specs;
  std::vector<Tensor> message(2);
  for (auto& [v, t] : bundle) {
    ids.push_back(static_cast<std::int32_t>(v));
    auto it = held.find(v);
    ir::ShardingSpec spec = it != held.end() ? it->second : ir::ShardingSpec::replicated(t.rank());
    specs.push_back(static_cast<std::int32_t>(spec.dims().size()));
    for (ir::MeshAxes a : spec.dims()) specs.push_back(static_cast<std::int32_t>(a));
    specs.push_back(static_cast<std::int32_t>(spec.partial()));
    message.push_back(std::move(t));
  }
  const auto count = static_cast<std::int64_t>(ids.size());
  const auto codes = static_cast<std::int64_t>(specs.size());
  message[0] = Tensor::fromI32({count}, std::move(ids));
  message[1] = Tensor::fromI32({codes}, std::move(specs));
  return message;
}

ValueTable decodeMessage(std::vector<Tensor>&& message, HeldSpecs& held) {
  if (message.size() < 2 || message[0].dtype() != ir::DType::I32 || message[1].dtype() != ir::DType::I32 ||
      message[0].elements() + 2 != static_cast<std::int64_t>(message.size()))
    malformed();
  ValueTable bundle;
  auto ids = message[0].i32();
  auto codes = message[1].i32();
  std::size_t at = 0;
  auto next = [&] {
    if (at >= codes.size()) malformed();
    return codes[at++];
  };
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto v = static_cast<ir::ValueId>(ids[i]);
    std::vector<ir::MeshAxes> dims(static_cast<std::size_t>(std::max(0, next())));
    for (ir::MeshAxes& a : dims) a = axesOf(next());
    ir::ShardingSpec spec = ir::ShardingSpec::fromDims(dims, axesOf(next()));
    if (spec.isReplicated()) held.erase(v);
    else held.insert_or_assign(v, spec);
    bundle.emplace(v, std::move(message[i + 2]));
  }
  return bundle;
}

}  // namespace meshflow::runtime
