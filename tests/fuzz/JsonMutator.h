// Structure-aware mutation of JSON inputs: most mutations parse the input, change
// one node of the tree (a boundary number, a deleted key, a subtree copied over
// another, a value of another type) and print it again, so the input stays JSON
// and the fuzzer spends its time in the readers' checks, not in the JSON parser.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace meshflow::fuzz {

/// `text` mutated once; byte-level (libFuzzer's own mutators) when `text` is not
/// JSON or the dice say so. The result is at most `maxSize` bytes.
std::string mutateJson(const std::string& text, std::size_t maxSize, unsigned seed);

/// libFuzzer's byte mutators on `text` (at most `maxSize` bytes).
std::string mutateBytes(std::string text, std::size_t maxSize);

}  // namespace meshflow::fuzz
