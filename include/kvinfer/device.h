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

// The CPU threads a model runs on when LoadOptions::threads is 0: $OMP_NUM_THREADS when set,
// else the cores this process may use (its affinity mask), less the cores other processes keep
// busy (the load average), at least 1 (docs/architecture.md, "Threads", says why). 1 in a
// build without OpenMP.
int default_cpu_threads();

}  // namespace kvinfer
KVINFER_PUBLIC_END
