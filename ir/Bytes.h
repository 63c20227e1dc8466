// Bytes as meshflow prints them everywhere (plan tables, the REPL, memory
// messages). Its own header and source, without Plan.h's JSON, so that the
// runtime's memory accounting builds and links where nlohmann/json is not
// installed (the GPU check's standalone build, tests/gpu/CMakeLists.txt).
// ir/Plan.h declares it too, for its existing users (to be replaced by an
// include of this header).
#pragma once

#include <string>

namespace meshflow::ir {

/// Bytes as the plan table, the REPL and memory messages print them: binary
/// units with three significant digits ("512 B", "1.11 MiB", "1015 KiB", "80 GiB").
std::string formatBytes(double bytes);

}  // namespace meshflow::ir
