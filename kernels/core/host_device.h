#pragma once
// KVI_HD marks scalar math shared by the CPU backend and the CUDA kernels.
#if defined(__CUDACC__)
#define KVI_HD __host__ __device__ __forceinline__
#else
#define KVI_HD inline
#endif
