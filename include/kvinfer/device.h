#pragma once
#include <string_view>

#include "kvinfer/export.h"

KVINFER_PUBLIC_BEGIN
namespace kvinfer {

// Where a model's weights live and its forward pass runs. Auto: the first CUDA device when one
// is usable, else the CPU. CUDA without a usable device is a clear error at load time.
enum class Device { Auto, CPU, CUDA };

std::string_view device_name(Device d);

// Number of usable CUDA devices; 0 when built without CUDA or when the driver reports any
// failure (no driver, insufficient driver, no device). Never throws.
int cuda_device_count() noexcept;

// Threads the CPU backend runs on from now on, process-wide; n <= 0 means one per core. Until
// it is called, OpenMP's default applies ($OMP_NUM_THREADS, else one per core). Results do not
// depend on the count. Without OpenMP the backend has one thread and this does nothing.
void set_cpu_threads(int n);
// Threads the CPU backend runs on now (1 without OpenMP).
int cpu_threads();

}  // namespace kvinfer
KVINFER_PUBLIC_END
