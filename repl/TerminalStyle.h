// Colours for diagnostics on a terminal: `error:` in bold red, `note:` in bold
// cyan. Only when the output is a terminal, NO_COLOR (no-color.org) is unset
// and TERM is not "dumb"; files, pipes and tests get the plain text.
#pragma once

#include <string>
#include <string_view>

namespace meshflow::cli {

/// Whether text written to the file descriptor `fd` may carry colours.
bool colourFor(int fd);

/// `diagnostics` (as renderAll writes them) with their severities coloured.
std::string coloured(std::string_view diagnostics);

/// coloured(diagnostics) when colourFor(fd), else diagnostics unchanged.
std::string styledFor(int fd, std::string_view diagnostics);

}  // namespace meshflow::cli
