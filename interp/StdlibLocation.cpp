#include "interp/StdlibLocation.h"

#include <dlfcn.h>

#include <filesystem>
#include <system_error>

namespace meshflow::interp {
namespace {

namespace fs = std::filesystem;

// The file this function's code was loaded from: libmeshflow.so for a host of
// the installed package, the executable when the static libraries were linked in.
fs::path loadedFrom() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&loadedFrom), &info) == 0 || info.dli_fname == nullptr)
    return {};
  std::error_code error;
  fs::path path = fs::canonical(info.dli_fname, error);
  return error ? fs::path() : path;
}

bool holdsStdlib(const fs::path& folder) {
  std::error_code error;
  return fs::is_regular_file(folder / "layers.mesh", error);
}

std::string findStdlibDir() {
  fs::path binary = loadedFrom();
  if (!binary.empty()) {
    // A library sits in PREFIX/lib, an executable in PREFIX/bin.
    for (const char* relative : {MESHFLOW_STDLIB_FROM_LIB, MESHFLOW_STDLIB_FROM_BIN}) {
      fs::path candidate = (binary.parent_path() / relative).lexically_normal();
      if (holdsStdlib(candidate)) return candidate.string();
    }
  }
  return MESHFLOW_STDLIB_DIR;
}

}  // namespace

// Found once per process: the binary does not move, and the search (dladdr, a
// canonical path, a stat per candidate) cost a tenth of a short script's eval
// (the fuzzer's inputs, a host that makes an interpreter per request).
std::string defaultStdlibDir() {
  static const std::string dir = findStdlibDir();
  return dir;
}

}  // namespace meshflow::interp
