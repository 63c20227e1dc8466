// Bytes as meshflow prints them everywhere (plan tables, the REPL, memory
// messages). Its own header and source, without Plan.h's JSON, so that the
// runtime's memory accounting builds and links where nlohmann/json is not
// installed (the GPU check's standalone build, tests/gpu/CMakeLists.txt).
#pragma once

#include <string>

namespace meshflow::ir {

/// Bytes as everything meshflow prints computed sizes: the plan table, the
/// REPL, records' byte quantities and error messages. Binary units with three
/// significant digits ("512 B", "1.11 MiB", "1015 KiB", "80 GiB", "-2 KiB").
std::string formatBytes(double bytes);

/// Seconds as the plan table, the REPL and compare() print them: three
/// significant digits in s, ms or us ("71.6 ms", "0 s").
std::string formatSeconds(double seconds);

}  // namespace meshflow::ir
