# Decides KVINFER_WITH_CUDA from KVINFER_CUDA (AUTO / ON / OFF) and KVINFER_CUDA_SIM.
#
# KVINFER_CUDA_SIM=ON builds the CUDA backend without nvcc or a GPU: kernels/*.cu and src/cuda/
# are compiled by the host compiler against the simulation in sim/ (docs/cuda.md), so that every
# CUDA test runs on the CPU. No CUDA runtime or cuBLAS is linked.
include(CheckLanguage)
set(KVINFER_WITH_CUDA OFF)
if(KVINFER_CUDA_SIM)
  if(KVINFER_CUDA STREQUAL "ON")
    message(FATAL_ERROR "KVINFER_CUDA_SIM=ON and KVINFER_CUDA=ON exclude each other: the simulation replaces nvcc")
  endif()
  set(KVINFER_WITH_CUDA ON)
  add_compile_definitions(KVINFER_CUDA_SIM)
elseif(NOT KVINFER_CUDA STREQUAL "OFF")
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(KVINFER_WITH_CUDA ON)
  elseif(KVINFER_CUDA STREQUAL "ON")
    message(FATAL_ERROR "KVINFER_CUDA=ON but no CUDA compiler (nvcc) was found")
  else()
    message(STATUS "kvinfer: nvcc not found, building without CUDA")
  endif()
endif()

if(KVINFER_WITH_CUDA AND NOT KVINFER_CUDA_SIM)
  # Nothing to detect on a GPU-less builder: default to Hopper (H100/H200) and Ampere.
  # Users choose others with -DCMAKE_CUDA_ARCHITECTURES="89;90" (or "native" on a GPU machine).
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES "80;90" CACHE STRING "CUDA architectures to build for")
  endif()
  enable_language(CUDA)
  # CMake 3.25 does not know nvcc's C++20 flag (nvcc >= 12 has it); teach it.
  if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  find_package(CUDAToolkit REQUIRED)
endif()

# Compile options for CUDA sources.
set(KVINFER_CUDA_FLAGS --expt-relaxed-constexpr)
# What a target that calls cuBLAS itself (tests, benchmarks) links besides kvinfer_internal: the
# CUDA runtime comes with kvinfer_internal (cudart_static, the one instance the library's code
# uses: never add CUDA::cudart, a second, shared one). libcublas, which kvinfer itself dlopens
# (src/cuda/cublas_loader.h), is then the same loaded library. Nothing extra in the simulation,
# whose objects are in kvinfer_internal.
if(KVINFER_WITH_CUDA AND NOT KVINFER_CUDA_SIM)
  set(KVINFER_CUDA_LIBS CUDA::cublas)
else()
  set(KVINFER_CUDA_LIBS "")
endif()
