// The seam between meshflow's NCCL code and NCCL itself: every NCCL (and the
// one CUDA stream) call that NcclComm and NcclCommunicator make, as plain
// functions answering NCCL's status (0: ncclSuccess). NcclCalls.cpp binds
// NCCL's own calls; the unit tests bind a fake (tests/unit/cuda/FakeNccl.h)
// whose ranks are threads and whose "device memory" is host memory, so the
// host-side logic runs in CI without a GPU.
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <string>

#include "ir/Graph.h"

namespace meshflow::runtime::cuda {

constexpr std::size_t kNcclIdBytes = 128;  ///< NCCL_UNIQUE_ID_BYTES
using NcclId = std::array<std::byte, kNcclIdBytes>;
using NcclHandle = void*;  ///< An ncclComm_t.
using NcclStream = void*;  ///< A cudaStream_t: where the data calls are enqueued.
using NcclEvent = void*;   ///< A cudaEvent_t: a point in a stream.

struct NcclCalls {
  // ---- A communicator's life ----
  std::function<int(NcclId&)> getUniqueId;
  std::function<int(NcclHandle&, int ranks, const NcclId&, int rank)> initRank;
  std::function<int(NcclHandle, int& asyncError)> getAsyncError;
  std::function<int(NcclHandle)> abort;
  std::function<int(NcclHandle)> destroy;
  std::function<std::string(int status)> describe;

  // ---- Data calls: enqueued on `stream`, done when streamDone says so ----
  // Counts are elements of `dtype` (f32, f16, bf16 or i32); pointers are
  // device memory (or managed memory). Sums are NCCL's ncclSum.
  std::function<int()> groupStart;
  std::function<int()> groupEnd;
  std::function<int(const void* data, std::size_t count, ir::DType, int peer, NcclHandle,
                    NcclStream)>
      send;
  std::function<int(void* data, std::size_t count, ir::DType, int peer, NcclHandle, NcclStream)>
      recv;
  std::function<int(const void* in, void* out, std::size_t count, ir::DType, NcclHandle,
                    NcclStream)>
      allReduce;
  /// `count`: the elements each rank brings.
  std::function<int(const void* in, void* out, std::size_t count, ir::DType, NcclHandle,
                    NcclStream)>
      allGather;
  /// `count`: the elements each rank keeps.
  std::function<int(const void* in, void* out, std::size_t count, ir::DType, NcclHandle,
                    NcclStream)>
      reduceScatter;
  std::function<int(const void* in, void* out, std::size_t count, ir::DType, int root, NcclHandle,
                    NcclStream)>
      broadcast;
  /// Whether everything enqueued on `stream` so far has finished (a CUDA
  /// error other than "not ready" throws).
  std::function<bool(NcclStream)> streamDone;
  /// A stream of its own on the calling thread's current device (the
  /// point-to-point channels run on such streams), and its end.
  std::function<NcclStream()> makeStream;
  std::function<void(NcclStream)> destroyStream;
  /// An event recorded on `stream` now: done once everything enqueued there
  /// so far has finished (a started all-reduce's end, with later ones on the
  /// same stream still running). eventDone throws as streamDone does.
  std::function<NcclEvent(NcclStream)> recordEvent;
  std::function<bool(NcclEvent)> eventDone;
  std::function<void(NcclEvent)> destroyEvent;
};

/// NCCL's own calls; throws NcclError in a build without NCCL.
NcclCalls ncclCalls();

}  // namespace meshflow::runtime::cuda
