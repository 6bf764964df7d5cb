#pragma once
// The CUDA simulation's <cuda_runtime_api.h>: see kvi_sim.h.
#include "kvi_sim.h"
