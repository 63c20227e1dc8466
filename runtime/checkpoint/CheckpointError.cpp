#include "runtime/checkpoint/Checkpoint.h"

namespace meshflow::runtime {
namespace {

std::string errorText(const std::filesystem::path& file, const std::string& detail,
                      const std::string& tensor) {
  std::string text = file.string() + ": ";
  if (!tensor.empty()) text += "tensor '" + tensor + "': ";
  return text + detail;
}

}  // namespace

CheckpointError::CheckpointError(const std::filesystem::path& file, const std::string& detail,
                                 const std::string& tensor)
    : std::runtime_error(errorText(file, detail, tensor)),
      file_(file),
      tensor_(tensor),
      detail_(detail) {}

}  // namespace meshflow::runtime
