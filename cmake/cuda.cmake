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

# The simulation's access checks (sim/src/access.cpp: misaligned accesses, racecheck, interleaved
# blocks): kernels are compiled with -fsanitize=thread, whose load and store hooks the simulation
# defines itself (no ThreadSanitizer runtime is linked). Not in the sanitizer builds: their runtime
# would clash, and one -fsanitize= instrumentation at a time is all the compilers take.
set(KVINFER_SIM_ACCESS_FLAGS "")
if(KVINFER_CUDA_SIM AND NOT KVINFER_SANITIZE AND NOT KVINFER_FUZZ)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    set(KVINFER_SIM_ACCESS_FLAGS -fsanitize=thread --param=tsan-instrument-func-entry-exit=0)
  elseif(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    set(KVINFER_SIM_ACCESS_FLAGS -fsanitize=thread "SHELL:-mllvm -tsan-instrument-func-entry-exit=0")
  endif()
endif()

# Compile options for CUDA sources.
set(KVINFER_CUDA_FLAGS --expt-relaxed-constexpr)
# What a CUDA test or benchmark links besides kvinfer_internal: nothing. The CUDA runtime comes
# with kvinfer_internal (cudart_static, the one instance the library's code uses: never add
# CUDA::cudart, a second, shared one), and cuBLAS is dlopened (src/cuda/cublas_loader.h; tests
# call it through cuda::cublas()), so no executable needs a CUDA library to start: a GPU machine's
# toolkit, or PyTorch's nvidia-cublas wheel, provides libcublas at run time (tools/gpu_bundle.sh).
set(KVINFER_CUDA_LIBS "")
