// The custom mutator of the JSON targets (fuzz_sharding, fuzz_stages, fuzz_plan).
#include <cstring>

#include "tests/fuzz/JsonMutator.h"

extern "C" std::size_t LLVMFuzzerCustomMutator(std::uint8_t* data, std::size_t size,
                                               std::size_t maxSize, unsigned int seed) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::string mutated = meshflow::fuzz::mutateJson(text, maxSize, seed);
  std::memcpy(data, mutated.data(), mutated.size());
  return mutated.size();
}
