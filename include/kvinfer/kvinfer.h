#pragma once
// The whole public API of kvinfer.
#include "kvinfer/config.h"
#include "kvinfer/device.h"
#include "kvinfer/dtype.h"
#include "kvinfer/error.h"
#include "kvinfer/generate.h"
#include "kvinfer/kv_cache.h"
#include "kvinfer/kv_plan.h"
#include "kvinfer/model.h"
#include "kvinfer/session.h"
