// Uses kvinfer only through its public API, as an outside project would: checks that the library
// is the headers' version, plans a KV cache without weights, then loads a model directory and
// runs one prefill and one decode step.
// Exits non-zero on any mismatch or error.
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include <kvinfer/kvinfer.h>

namespace {

// "0,4,6" → {0, 4, 6}
std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    ids.push_back(static_cast<int32_t>(std::stol(text.substr(begin, end - begin))));
    begin = end + 1;
  }
  return ids;
}

bool check(bool ok, const char* what) {
  std::printf("%s: %s\n", ok ? "ok  " : "FAIL", what);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: %s <model dir> <prompt ids, e.g. 0,4,6> [<expected prefill argmax>,<expected decode argmax>]\n",
                 argv[0]);
    return 2;
  }
  bool ok = true;
  try {
    // The headers compiled in against the library that runs.
    std::printf("kvinfer headers %s (%d), library %s (%d)\n", KVINFER_VERSION_STRING, KVINFER_VERSION,
                kvinfer::version_string(), kvinfer::version());
    ok &= check(kvinfer::version() == KVINFER_VERSION &&
                    std::string(kvinfer::version_string()) == KVINFER_VERSION_STRING,
                "library version == header version");

    // The worked example of docs/kv-cache.md: 32 layers × 8 KV heads × head_dim 128 × 8192 tokens × 2 bytes.
    kvinfer::ModelConfig planned;
    planned.num_layers = 32;
    planned.num_heads = 32;
    planned.num_kv_heads = 8;
    planned.head_dim = 128;
    const uint64_t bytes = kvinfer::plan_kv_bytes(planned, 8192, kvinfer::DType::F16);
    std::printf("plan_kv_bytes(32 layers, 8 KV heads, head_dim 128, 8192 tokens, f16) = %" PRIu64 "\n", bytes);
    ok &= check(bytes == 1073741824u, "plan_kv_bytes == 1073741824 (1 GiB)");

    const std::vector<int32_t> prompt = parse_ids(argv[2]);
    auto model = kvinfer::Model::load(argv[1]);
    std::printf("loaded %s: %s, %" PRId64 " layers, %" PRId64 " heads / %" PRId64 " KV heads, weights %s\n", argv[1],
                std::string(kvinfer::architecture_name(model->config().arch)).c_str(), model->config().num_layers,
                model->config().num_heads, model->config().num_kv_heads,
                std::string(kvinfer::dtype_name(model->weight_dtype())).c_str());

    kvinfer::KvCache kv(*model, static_cast<int64_t>(prompt.size()) + 1);
    ok &= check(kv.bytes() == kvinfer::plan_kv_bytes(model->config(), kv.capacity(), kv.dtype()),
                "KvCache::bytes() == plan_kv_bytes(config, capacity, dtype)");

    kvinfer::Session session(model);
    const int32_t first = kvinfer::argmax(session.prefill(kv, prompt));
    const int32_t second = kvinfer::argmax(session.decode(kv, first));
    std::printf("prefill argmax %d, decode argmax %d\n", first, second);
    ok &= check(kv.size() == static_cast<int64_t>(prompt.size()) + 1, "kv.size() == prompt + 1");

    if (argc == 4) {
      const std::vector<int32_t> expected = parse_ids(argv[3]);
      ok &= check(expected.size() == 2 && expected[0] == first && expected[1] == second,
                  "argmax ids == expected");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvinfer-consumer: %s\n", e.what());
    return 1;
  }
  return ok ? 0 : 1;
}
