// GPipe: every rank runs all forwards, then all backwards.
#pragma once

#include "ir/PipelineSchedule.h"

namespace meshflow::passes {

/// All m forwards then all m backwards on every rank, backwards in microbatch order
/// 0..m−1 as Picotron and PyTorch run them. Holds m microbatches in flight.
ir::PipelineSchedule buildGPipe(int stages, int microbatches);

}  // namespace meshflow::passes
