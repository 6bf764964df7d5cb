// How long a context fits in a memory budget, per KV cache dtype, read from the model's files
// without loading its weights (kvinfer::inspect_model).
//
//   kvinfer-example-memory-plan MODEL BUDGET_MIB
#include <cstdio>
#include <cstdlib>
#include <optional>

#include <kvinfer/kvinfer.h>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s MODEL BUDGET_MIB\n", argv[0]);
    return 2;
  }
  try {
    const kvinfer::ModelInfo info = kvinfer::inspect_model(argv[1]);
    const uint64_t budget = std::strtoull(argv[2], nullptr, 10) << 20;
    std::printf("%s: %s, %lld layers, %lld KV heads × %lld, weights %s (%s), context %lld\n",
                info.path.c_str(), kvinfer::architecture_name(info.config.arch).data(),
                static_cast<long long>(info.config.num_layers), static_cast<long long>(info.config.num_kv_heads),
                static_cast<long long>(info.config.head_dim), kvinfer::format_bytes(info.weight_bytes).c_str(),
                kvinfer::dtype_name(info.weight_dtype).data(),
                static_cast<long long>(info.config.max_position_embeddings));
    if (info.weight_bytes >= budget) {
      std::printf("the weights alone need more than %s\n", kvinfer::format_bytes(budget).c_str());
      return 1;
    }
    for (const kvinfer::DType dtype : {kvinfer::DType::F32, kvinfer::DType::F16, kvinfer::DType::BF16}) {
      const uint64_t per_token = info.kv_bytes(1, dtype);
      const auto fits = static_cast<int64_t>((budget - info.weight_bytes) / per_token);
      const int64_t tokens = std::min(fits, info.config.max_position_embeddings);
      std::printf("  %-4s %s a token: %lld tokens fit (cache %s)\n", kvinfer::dtype_name(dtype).data(),
                  kvinfer::format_bytes(per_token).c_str(), static_cast<long long>(tokens),
                  kvinfer::format_bytes(info.kv_bytes(tokens, dtype)).c_str());
    }
    return 0;
  } catch (const kvinfer::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
