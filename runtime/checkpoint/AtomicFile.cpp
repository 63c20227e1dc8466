#include "runtime/checkpoint/AtomicFile.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace meshflow::runtime::checkpoint {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void failWithErrno(const char* what, const fs::path& path) {
  throw fs::filesystem_error(what, path, std::error_code(errno, std::generic_category()));
}

// Owns a POSIX file descriptor; close() reports the error a destructor cannot.
class Descriptor {
 public:
  Descriptor(const fs::path& path, int flags, mode_t mode = 0)
      : path_(path), fd_(::open(path.c_str(), flags | O_CLOEXEC, mode)) {
    if (fd_ < 0) failWithErrno("cannot open", path_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }

  int get() const { return fd_; }
  void sync() {
    if (::fsync(fd_) != 0) failWithErrno("cannot fsync", path_);
  }
  void close() {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) failWithErrno("cannot close", path_);
  }

 private:
  fs::path path_;
  int fd_;
};

void writeAll(Descriptor& file, std::span<const std::uint8_t> bytes, const fs::path& path) {
  while (!bytes.empty()) {
    const ssize_t written = ::write(file.get(), bytes.data(), bytes.size());
    if (written < 0 && errno == EINTR) continue;
    if (written < 0) failWithErrno("cannot write", path);
    bytes = bytes.subspan(static_cast<std::size_t>(written));
  }
}

}  // namespace

void writeFileDurably(const fs::path& file, std::span<const std::uint8_t> bytes) {
  Descriptor out(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  writeAll(out, bytes, file);
  out.sync();
  out.close();
}

void writeFileDurably(const fs::path& file, std::string_view text) {
  writeFileDurably(file, {reinterpret_cast<const std::uint8_t*>(text.data()), text.size()});
}

void syncDirectory(const fs::path& directory) {
  Descriptor dir(directory.empty() ? fs::path(".") : directory, O_RDONLY | O_DIRECTORY);
  dir.sync();
  dir.close();
}

void renameDurably(const fs::path& from, const fs::path& to, const fs::path& directory) {
  fs::rename(from, to);
  syncDirectory(directory);
}

void replaceFileDurably(const fs::path& file, std::string_view text, const fs::path& temporary) {
  writeFileDurably(temporary, text);
  renameDurably(temporary, file, file.parent_path());
}

std::vector<std::uint8_t> readWholeFile(const fs::path& file) {
  Descriptor in(file, O_RDONLY);
  std::vector<std::uint8_t> bytes;
  std::uint8_t buffer[1 << 16];
  for (;;) {
    const ssize_t got = ::read(in.get(), buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) failWithErrno("cannot read", file);
    if (got == 0) break;
    bytes.insert(bytes.end(), buffer, buffer + got);
  }
  in.close();
  return bytes;
}

}  // namespace meshflow::runtime::checkpoint
