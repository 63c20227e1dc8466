// Where `import std.x` looks when the host's Config names no stdlib folder.
#pragma once

#include <string>

namespace meshflow::interp {

/// The stdlib folder beside the installed library or executable this code was
/// linked into (PREFIX/share/meshflow/stdlib after `cmake --install`), so an
/// installed tree works wherever it is moved; otherwise this source tree's stdlib/.
std::string defaultStdlibDir();

}  // namespace meshflow::interp
