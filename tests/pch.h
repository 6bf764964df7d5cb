// The headers most test files include, precompiled once per build and reused by every test
// executable (tests/CMakeLists.txt): parsing them took ~5 s of each file's compile.
#pragma once
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvinfer/kvinfer.h"
