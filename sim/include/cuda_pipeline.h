#pragma once
// The CUDA simulation's <cuda_pipeline.h>: asynchronous copies into shared memory that land only
// when __pipeline_wait_prior covers their batch, so that a missing wait reads the poison.
#include "kvi_sim.h"

inline void __pipeline_memcpy_async(void* dst_shared, const void* src_global, size_t size_and_align,
                                    size_t zfill = 0) {
  kvi_sim::pipeline_memcpy_async(dst_shared, src_global, size_and_align, zfill);
}
inline void __pipeline_commit() { kvi_sim::pipeline_commit(); }
inline void __pipeline_wait_prior(size_t prior) { kvi_sim::pipeline_wait_prior(prior); }
