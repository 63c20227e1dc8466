// A CallSignature as an i32 tensor, so that NcclCommunicator can send one
// member's call to the others over any control Communicator and compare it
// there (runtime/CallSignature.h: callDifference).
#pragma once

#include "runtime/CallSignature.h"
#include "runtime/Tensor.h"

namespace meshflow::runtime::cuda {

Tensor signatureTensor(const CallSignature& call);
/// Throws std::invalid_argument for a tensor signatureTensor did not make.
CallSignature signatureOf(const Tensor& tensor);

}  // namespace meshflow::runtime::cuda
