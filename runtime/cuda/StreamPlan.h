// Which CUDA events a device's instructions wait for when each runs on its
// Program stream (compute, comm, grad: ir::Instruction::stream) — the plan a
// device with a CUDA stream per Program stream follows so that sends,
// receives and gradient all-reduces overlap compute as the simulator assumes.
// Pure host-side logic over a device's code, unit-tested without a GPU; the
// executor does not use it yet (docs/cuda.md: every op still waits for its
// stream).
#pragma once

#include <cstddef>
#include <vector>

#include "ir/Program.h"

namespace meshflow::runtime::cuda {

struct StreamStep {
  ir::Stream stream = ir::Stream::kCompute;
  /// Earlier instructions on other streams whose recorded event this one waits
  /// for before it is enqueued: the last one per other stream that it must
  /// follow (a stream runs in order, so that covers the earlier ones).
  std::vector<std::size_t> waitFor;
  /// Whether an event is recorded after it (a later instruction waits for it).
  bool recordEvent = false;
};

/// The plan for `code`: an instruction follows, on another stream, the last
/// instruction that wrote a buffer it reads or writes (read after write,
/// write after write) and every instruction since that read a buffer it
/// writes (write after read). Same-stream order needs no event.
std::vector<StreamStep> planStreams(const ir::DeviceCode& code);

}  // namespace meshflow::runtime::cuda
