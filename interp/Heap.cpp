#include "interp/Heap.h"

#include <fmt/format.h>

#include <algorithm>

#include "interp/Object.h"
#include "ir/Bytes.h"
#include "meshflow/Error.h"

namespace meshflow::interp {

void MemoryAccount::charge(std::size_t bytes) {
  if (wouldPass(bytes))
    throw ScriptError(DiagnosticKind::MemoryLimit,
                      fmt::format("values would hold {} ({} bytes), more than the limit of {} "
                                  "({} bytes; raise it with --max-memory)",
                                  ir::formatBytes(static_cast<double>(used_ + bytes)), used_ + bytes,
                                  ir::formatBytes(static_cast<double>(limit_)), limit_));
  used_ += bytes;
}

void MemoryAccount::checkRoom(std::size_t bytes, const std::string& what) const {
  if (wouldPass(bytes))
    throw ScriptError(DiagnosticKind::MemoryLimit,
                      fmt::format("{} would take {} ({} bytes) beside the {} values hold, more "
                                  "than the limit of {} ({} bytes; raise it with --max-memory)",
                                  what, ir::formatBytes(static_cast<double>(bytes)), bytes,
                                  ir::formatBytes(static_cast<double>(used_)),
                                  ir::formatBytes(static_cast<double>(limit_)), limit_));
}

Heap::~Heap() {
  // Break every cycle first; the objects then die with their last owner.
  for (auto& weak : containers_)
    if (auto object = weak.lock()) object->clearReferences();
}

void Heap::adopt(const std::shared_ptr<Object>& object, std::size_t bytes) {
  object->setAccount(account_, bytes);
  if (!object->holdsReferences()) return;
  if (containers_.size() >= pruneAt_) {
    std::erase_if(containers_, [](const std::weak_ptr<Object>& w) { return w.expired(); });
    pruneAt_ = std::max<std::size_t>(1024, containers_.size() * 2);
  }
  containers_.push_back(object);
}

}  // namespace meshflow::interp
