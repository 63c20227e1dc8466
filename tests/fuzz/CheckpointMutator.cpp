// The custom mutator of fuzz_checkpoint: bundles stay bundles.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/CheckpointBundle.h"
#include "tests/fuzz/JsonMutator.h"

using namespace meshflow;

// Mutates one section: meta.json as JSON, the others as bytes; now and then the flags.
extern "C" std::size_t LLVMFuzzerCustomMutator(std::uint8_t* data, std::size_t size,
                                               std::size_t maxSize, unsigned int seed) {
  fuzz::CheckpointBundle bundle = fuzz::CheckpointBundle::decode(data, size);
  const std::size_t sections = 2 + bundle.shards.size();
  const std::size_t pick = seed % (sections + 1);
  const std::size_t budget = maxSize > size ? maxSize - size : 0;
  if (pick == sections) {
    bundle.flags ^= static_cast<std::uint8_t>(1u << (seed / 7 % 2));
  } else if (pick == 0) {
    bundle.latest = fuzz::mutateBytes(bundle.latest, bundle.latest.size() + budget);
  } else if (pick == 1) {
    bundle.meta = fuzz::mutateJson(bundle.meta, bundle.meta.size() + budget, seed);
  } else {
    std::string& shard = bundle.shards[pick - 2];
    shard = fuzz::mutateBytes(shard, shard.size() + budget);
  }
  std::string out = bundle.encode();
  if (out.size() > maxSize) return size;
  std::copy(out.begin(), out.end(), data);
  return out.size();
}
