#include "runtime/Communicator.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace meshflow::runtime {

CommError::CommError(Kind kind, int device, std::string detail)
    : std::runtime_error(fmt::format("device {}: {}", device, detail)),
      kind_(kind),
      device_(device),
      detail_(std::move(detail)) {}

namespace {

class FinishedAllReduce final : public PendingAllReduce {
 public:
  void finish() override {}
};

}  // namespace

std::unique_ptr<PendingAllReduce> Communicator::startAllReduce(const std::vector<int>& group,
                                                               std::vector<Tensor*> tensors) {
  allReduce(group, std::move(tensors));
  return std::make_unique<FinishedAllReduce>();
}

std::string groupText(const std::vector<int>& group) {
  return fmt::format("[{}]", fmt::join(group, ", "));
}

}  // namespace meshflow::runtime
