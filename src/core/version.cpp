#include "kvinfer/version.h"

namespace kvinfer {

int version() { return KVINFER_VERSION; }
const char* version_string() { return KVINFER_VERSION_STRING; }

}  // namespace kvinfer
