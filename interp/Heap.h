// Accounting for the memory that script values hold, and breaking reference
// cycles when an interpreter goes away.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace meshflow::interp {

class Object;

/// Bytes held by live values of one interpreter, against the host's limit.
/// Objects keep the account alive, so a value that outlives its interpreter
/// (held by the host) still releases its bytes safely.
class MemoryAccount {
 public:
  explicit MemoryAccount(std::size_t limit) : limit_(limit) {}
  /// Adds `bytes`; throws a MemoryLimit ScriptError if that passes the limit.
  void charge(std::size_t bytes);
  void release(std::size_t bytes) { used_ -= bytes < used_ ? bytes : used_; }
  /// Throws the MemoryLimit ScriptError charge() would, naming `what`, if
  /// `bytes` more would pass the limit; charges nothing.
  void checkRoom(std::size_t bytes, const std::string& what) const;
  std::size_t used() const { return used_; }
  std::size_t limit() const { return limit_; }
  /// Whether `bytes` more would pass the limit.
  bool wouldPass(std::size_t bytes) const { return bytes > limit_ || used_ > limit_ - bytes; }

 private:
  std::size_t used_ = 0;
  std::size_t limit_;
};

/// Creates the interpreter's container objects and remembers them (weakly), so
/// that cycles between them — a closure stored in the scope it captured, a list
/// that contains itself — are broken when the interpreter is destroyed.
class Heap {
 public:
  explicit Heap(std::size_t memoryLimit)
      : account_(std::make_shared<MemoryAccount>(memoryLimit)) {}
  ~Heap();
  Heap(const Heap&) = delete;
  Heap& operator=(const Heap&) = delete;

  const std::shared_ptr<MemoryAccount>& account() const { return account_; }
  /// Charges `bytes` for `object` and tracks it if it can hold references.
  void adopt(const std::shared_ptr<Object>& object, std::size_t bytes);

 private:
  std::shared_ptr<MemoryAccount> account_;
  std::vector<std::weak_ptr<Object>> containers_;
  std::size_t pruneAt_ = 1024;
};

}  // namespace meshflow::interp
