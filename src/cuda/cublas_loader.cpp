#include "cuda/cublas_loader.h"

#include <string>

#include "kvinfer/error.h"

#ifndef KVINFER_CUDA_SIM
#include <dlfcn.h>
#endif

namespace kvinfer::cuda {

#ifdef KVINFER_CUDA_SIM

const CublasApi& cublas() {
  static const CublasApi api{&cublasCreate,       &cublasDestroy,        &cublasSetStream,
                             &cublasSetWorkspace, &cublasSetPointerMode, &cublasGemmEx,
                             &cublasGetStatusName, &cublasGetStatusString};
  return api;
}

#else

#ifndef KVINFER_CUBLAS_SONAME
#error "KVINFER_CUBLAS_SONAME (e.g. \"libcublas.so.13\") comes from src/CMakeLists.txt"
#endif

namespace {

struct Loaded {
  CublasApi api{};
  std::string error;  // empty when api is complete
};

template <typename F>
bool resolve(void* lib, const char* name, F& fn, std::string& error) {
  dlerror();
  void* sym = dlsym(lib, name);
  if (sym == nullptr) {
    const char* why = dlerror();
    error = std::string("cuBLAS: ") + KVINFER_CUBLAS_SONAME + " has no " + name + (why ? std::string(": ") + why : "");
    return false;
  }
  fn = reinterpret_cast<F>(sym);
  return true;
}

Loaded load() {
  Loaded l;
  // Never unloaded: cuBLAS handles may outlive any one owner, until exit.
  void* lib = dlopen(KVINFER_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    l.error = std::string("cuBLAS: cannot load ") + KVINFER_CUBLAS_SONAME +
              " (the CUDA backend needs it; install the CUDA toolkit's cuBLAS or add its directory to the "
              "library path): " + (why ? why : "unknown reason");
    return l;
  }
  CublasApi& a = l.api;
  // cublas_v2.h's cublasCreate and friends are macros for the _v2 symbols.
  if (resolve(lib, "cublasCreate_v2", a.create, l.error) && resolve(lib, "cublasDestroy_v2", a.destroy, l.error) &&
      resolve(lib, "cublasSetStream_v2", a.set_stream, l.error) &&
      resolve(lib, "cublasSetWorkspace_v2", a.set_workspace, l.error) &&
      resolve(lib, "cublasSetPointerMode_v2", a.set_pointer_mode, l.error) &&
      resolve(lib, "cublasGemmEx", a.gemm_ex, l.error) &&
      resolve(lib, "cublasGetStatusName", a.get_status_name, l.error) &&
      resolve(lib, "cublasGetStatusString", a.get_status_string, l.error)) {
    return l;
  }
  return l;
}

}  // namespace

const CublasApi& cublas() {
  static const Loaded loaded = load();
  if (!loaded.error.empty()) throw Error(ErrorKind::Device, loaded.error);
  return loaded.api;
}

#endif

}  // namespace kvinfer::cuda
