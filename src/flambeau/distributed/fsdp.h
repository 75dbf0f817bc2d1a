// Storage helpers of FSDP (flambeau.distributed.fsdp, fully_shard). Note [FSDP's unsharded
// parameters]: a block's unsharded parameter is one tensor object for the whole run: the
// module computes with it, and autograd's saved tensors share its storage. Resharding
// frees that storage's memory in place (every tensor on it stays valid as an object, with
// no memory); unsharding gives it fresh memory and fills it with the gathered values
// without a new version, so the saved tensors of the forward are valid again when the
// block's backward uses them (the values are the ones they were saved with). A backward
// that reaches a saved tensor whose memory is released raises instead of reading it
// (SavedTensor::unpack).
#pragma once
#include "flambeau/core/tensor.h"

namespace flambeau::distributed::fsdp {

// Frees the memory of t's storage in place (a no-op when already freed).
void release_memory(const Tensor& t);
// Gives t's storage memory for t again (contents undefined); a no-op when it has memory.
void allocate_memory(const Tensor& t);
bool has_memory(const Tensor& t);
// dst = src, both contiguous with the same dtype and numel, without bumping dst's version.
void fill_without_version(const Tensor& dst, const Tensor& src);

}  // namespace flambeau::distributed::fsdp
