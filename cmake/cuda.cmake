# Decides KVINFER_WITH_CUDA from KVINFER_CUDA (AUTO / ON / OFF).
include(CheckLanguage)
set(KVINFER_WITH_CUDA OFF)
if(NOT KVINFER_CUDA STREQUAL "OFF")
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(KVINFER_WITH_CUDA ON)
  elseif(KVINFER_CUDA STREQUAL "ON")
    message(FATAL_ERROR "KVINFER_CUDA=ON but no CUDA compiler (nvcc) was found")
  else()
    message(STATUS "kvinfer: nvcc not found, building without CUDA")
  endif()
endif()

if(KVINFER_WITH_CUDA)
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
