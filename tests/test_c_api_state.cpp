// The C API over the parts of issue #29 implemented separately from it: inspect_model, KV
// state files, KvCache::copy/tokens, the log callback, cancel callbacks, SessionOptions, the
// error kinds the library throws, and SamplingParams' greedy defaults. These tests link and pass
// once those implementations are in the tree (test_c_api.cpp covers the rest).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <iterator>
#include <string>
#include <vector>

#include "kvinfer/kvinfer.h"
#include "kvinfer/kvinfer_c.h"
#include "reference.h"

namespace kvinfer {
namespace {

const std::string kTiny = test::model_dir("chatml_tiny").string();

#define EXPECT_STATUS(expected, call)                                                                          \
  do {                                                                                                         \
    const kvinfer_status status_ = (call);                                                                     \
    EXPECT_EQ(status_, expected) << #call << ": " << kvinfer_status_name(status_) << ": " << kvinfer_last_error(); \
    if (status_ != KVINFER_OK) {                                                                               \
      EXPECT_STRNE(kvinfer_last_error(), "") << #call;                                                         \
    }                                                                                                          \
  } while (0)
#define ASSERT_OK(call) ASSERT_EQ((call), KVINFER_OK) << #call << ": " << kvinfer_last_error()

struct Handles {
  kvinfer_model* model = nullptr;
  kvinfer_session* session = nullptr;
  kvinfer_kv* kv = nullptr;
  ~Handles() {
    kvinfer_session_free(session);
    kvinfer_kv_free(kv);
    kvinfer_model_free(model);
  }
  void open(const kvinfer_session_options* so = nullptr, int64_t capacity = 64) {
    kvinfer_load_options o = kvinfer_load_options_default();
    o.device = KVINFER_DEVICE_CPU;
    ASSERT_OK(kvinfer_model_load(kTiny.c_str(), &o, &model));
    ASSERT_OK(kvinfer_kv_new(model, capacity, KVINFER_DTYPE_DEFAULT, &kv));
    ASSERT_OK(kvinfer_session_new(model, so, &session));
  }
};

std::vector<int32_t> prompt_ids() {
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < 12; ++i) ids.push_back(10 + 7 * i);
  return ids;
}

bool same_bits(const float* a, const float* b, size_t n) { return a && b && std::memcmp(a, b, n * sizeof(float)) == 0; }

TEST(CApiState, SamplingDefaultsEqualSamplingParamsDefaults) {
  const kvinfer_sampling_params c = kvinfer_sampling_default();
  const SamplingParams d;
  EXPECT_EQ(c.temperature, d.temperature);
  EXPECT_EQ(c.top_k, d.top_k);
  EXPECT_EQ(c.top_p, d.top_p);
  EXPECT_EQ(c.min_p, d.min_p);
  EXPECT_EQ(c.repetition_penalty, d.repetition_penalty);
  EXPECT_EQ(c.penalty_last_n, d.penalty_last_n);
}

TEST(CApiState, ErrorKindsBecomeStatuses) {
  kvinfer_model* m = nullptr;
  EXPECT_STATUS(KVINFER_ERR_BAD_FILE, kvinfer_model_load("/nonexistent/model.gguf", nullptr, &m));
  Handles h;
  h.open(nullptr, 8);
  const std::vector<int32_t> nine(9, 1);
  EXPECT_STATUS(KVINFER_ERR_CONTEXT_FULL, kvinfer_prefill(h.session, h.kv, nine.data(), nine.size(), nullptr));
  EXPECT_STATUS(KVINFER_ERR_CONTEXT_FULL, kvinfer_step(h.session, h.kv, nine.data(), nine.size()));
  EXPECT_EQ(kvinfer_kv_size(h.kv), 0);
  kvinfer_kv* kv = nullptr;
  EXPECT_STATUS(KVINFER_ERR_CONTEXT_FULL, kvinfer_kv_new(h.model, 100000, KVINFER_DTYPE_DEFAULT, &kv));  // beyond 256 positions
  EXPECT_STATUS(KVINFER_ERR_INVALID_ARGUMENT, kvinfer_decode(h.session, h.kv, 100000, nullptr));
}

// A sliding-window model (mistral_window: window 6, rings of 11 rows) after 30 positions: a
// truncate below the earliest rewind is refused, naming the positions lost, and changes nothing.
TEST(CApiState, TruncateBelowTheEarliestRewindIsRefused) {
  kvinfer_load_options o = kvinfer_load_options_default();
  o.device = KVINFER_DEVICE_CPU;
  kvinfer_model* model = nullptr;
  ASSERT_OK(kvinfer_model_load(test::model_dir("mistral_window").string().c_str(), &o, &model));
  kvinfer_kv* kv = nullptr;
  kvinfer_session* session = nullptr;
  ASSERT_OK(kvinfer_kv_new(model, 64, KVINFER_DTYPE_DEFAULT, &kv));
  ASSERT_OK(kvinfer_session_new(model, nullptr, &session));
  EXPECT_EQ(kvinfer_kv_earliest_rewind(kv), 0);
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < 30; ++i) ids.push_back(3 + 5 * i % 90);
  ASSERT_OK(kvinfer_prefill(session, kv, ids.data(), ids.size(), nullptr));
  const int64_t e = kvinfer_kv_earliest_rewind(kv);
  EXPECT_EQ(e, 30 - 6);  // the last write 30, less a piece of min(window, 512) = 6
  EXPECT_STATUS(KVINFER_ERR_INVALID_ARGUMENT, kvinfer_kv_truncate(kv, e - 1));
  EXPECT_NE(std::string(kvinfer_last_error()).find(std::to_string(e - 1)), std::string::npos) << kvinfer_last_error();
  EXPECT_EQ(kvinfer_kv_size(kv), 30);
  EXPECT_STATUS(KVINFER_OK, kvinfer_kv_truncate(kv, e));
  EXPECT_EQ(kvinfer_kv_size(kv), e);
  EXPECT_STATUS(KVINFER_OK, kvinfer_kv_truncate(kv, 0));
  EXPECT_EQ(kvinfer_kv_earliest_rewind(kv), 0);
  EXPECT_EQ(kvinfer_kv_earliest_rewind(nullptr), -1);
  kvinfer_session_free(session);
  kvinfer_kv_free(kv);
  kvinfer_model_free(model);
}

bool cancel_after(void* user) {
  int& calls = *static_cast<int*>(user);
  return ++calls > 1;  // the first question continues, the second stops
}

TEST(CApiState, CancelFromCallbacks) {
  kvinfer_session_options so = kvinfer_session_options_default();
  so.prefill_chunk_tokens = 2;
  Handles h;
  h.open(&so);
  const std::vector<int32_t> p = prompt_ids();
  int calls = 0;
  ASSERT_OK(kvinfer_session_set_cancel(h.session, cancel_after, &calls));
  EXPECT_STATUS(KVINFER_ERR_CANCELLED, kvinfer_prefill(h.session, h.kv, p.data(), p.size(), nullptr));
  EXPECT_EQ(kvinfer_kv_size(h.kv), 0);  // the cache as it was
  ASSERT_OK(kvinfer_session_set_cancel(h.session, nullptr, nullptr));
  EXPECT_STATUS(KVINFER_OK, kvinfer_prefill(h.session, h.kv, p.data(), p.size(), nullptr));

  ASSERT_OK(kvinfer_kv_truncate(h.kv, 0));
  kvinfer_generate_options o = kvinfer_generate_options_default();
  o.max_new_tokens = 50;
  o.ignore_eos = true;
  int gen_calls = -3;  // a few steps, then cancel
  o.cancel = cancel_after;
  o.cancel_user = &gen_calls;
  kvinfer_generate_result r{};
  EXPECT_STATUS(KVINFER_OK, kvinfer_generate(h.session, h.kv, p.data(), p.size(), &o, nullptr, nullptr, &r));
  EXPECT_EQ(r.stop, KVINFER_STOP_CANCELLED);
  EXPECT_LT(r.n_tokens, 50u);

  kvinfer_load_options lo = kvinfer_load_options_default();
  lo.device = KVINFER_DEVICE_CPU;
  int load_calls = 0;
  lo.cancel = cancel_after;
  lo.cancel_user = &load_calls;
  kvinfer_model* m = reinterpret_cast<kvinfer_model*>(0x1);
  EXPECT_STATUS(KVINFER_ERR_CANCELLED, kvinfer_model_load(kTiny.c_str(), &lo, &m));
  EXPECT_EQ(m, nullptr);
}

TEST(CApiState, SessionOptionsChangeNoBit) {
  const std::vector<int32_t> p = prompt_ids();
  std::vector<std::vector<float>> rows;
  for (auto [threads, chunk] : {std::pair<int32_t, int64_t>{1, 512}, {2, 512}, {1, 3}}) {
    kvinfer_session_options so = kvinfer_session_options_default();
    so.threads = threads;
    so.prefill_chunk_tokens = chunk;
    Handles h;
    h.open(&so);
    const float* l = nullptr;
    ASSERT_OK(kvinfer_prefill(h.session, h.kv, p.data(), p.size(), &l));
    rows.emplace_back(l, l + kvinfer_model_vocab_size(h.model));
  }
  EXPECT_EQ(rows[0], rows[1]);
  EXPECT_EQ(rows[0], rows[2]);
  kvinfer_session_options so = kvinfer_session_options_default();
  so.prefill_chunk_tokens = 0;
  Handles h;
  h.open();
  kvinfer_session* s = nullptr;
  EXPECT_STATUS(KVINFER_ERR_INVALID_ARGUMENT, kvinfer_session_new(h.model, &so, &s));
}

TEST(CApiState, InspectMatchesInspectModel) {
  for (const std::string& path : {kTiny, (std::filesystem::path(KVINFER_TEST_DATA) / "gguf" / "models" / "chatml_tiny.f32.gguf").string()}) {
    SCOPED_TRACE(path);
    const ModelInfo want = inspect_model(path);
    kvinfer_model_info* info = nullptr;
    ASSERT_OK(kvinfer_inspect(path.c_str(), &info));
    kvinfer_config c{};
    EXPECT_STATUS(KVINFER_OK, kvinfer_model_info_config(info, &c));
    EXPECT_EQ(c.vocab_size, want.config.vocab_size);
    EXPECT_EQ(c.num_layers, want.config.num_layers);
    EXPECT_EQ(c.num_kv_heads, want.config.num_kv_heads);
    EXPECT_EQ(static_cast<int>(kvinfer_model_info_format(info)), static_cast<int>(want.format));
    EXPECT_EQ(kvinfer_model_info_name(info), want.name);
    EXPECT_EQ(kvinfer_model_info_chat_template(info), want.chat_template);
    EXPECT_EQ(kvinfer_model_info_has_tokenizer(info), want.has_tokenizer);
    EXPECT_EQ(kvinfer_model_info_weight_bytes(info), want.weight_bytes);
    EXPECT_EQ(kvinfer_model_info_weight_dtype(info), static_cast<kvinfer_dtype>(want.weight_dtype));
    ASSERT_EQ(kvinfer_model_info_tensor_count(info), want.tensors.size());
    for (size_t i = 0; i < want.tensors.size(); ++i) {
      kvinfer_tensor_desc d{};
      ASSERT_OK(kvinfer_model_info_tensor(info, i, &d));
      EXPECT_EQ(d.name, want.tensors[i].name);
      EXPECT_EQ(d.type, want.tensors[i].type);
      EXPECT_EQ(static_cast<int>(d.dtype), want.tensors[i].dtype ? static_cast<int>(*want.tensors[i].dtype) : -1);
      EXPECT_EQ(std::vector<int64_t>(d.shape, d.shape + d.ndim), want.tensors[i].shape);
      EXPECT_EQ(d.bytes, want.tensors[i].bytes);
    }
    kvinfer_tensor_desc d{};
    EXPECT_STATUS(KVINFER_ERR_INVALID_ARGUMENT, kvinfer_model_info_tensor(info, want.tensors.size(), &d));
    uint64_t bytes = 0;
    EXPECT_STATUS(KVINFER_OK, kvinfer_model_info_kv_bytes(info, 100, KVINFER_DTYPE_DEFAULT, &bytes));
    EXPECT_EQ(bytes, want.kv_bytes(100));
    EXPECT_STATUS(KVINFER_OK, kvinfer_model_info_kv_bytes(info, 100, KVINFER_DTYPE_F32, &bytes));
    EXPECT_EQ(bytes, want.kv_bytes(100, DType::F32));
    EXPECT_NE(kvinfer_model_info_kv_bytes(info, -1, KVINFER_DTYPE_DEFAULT, &bytes), KVINFER_OK);
    kvinfer_model_info_free(info);
  }
  kvinfer_model_info* info = nullptr;
  EXPECT_STATUS(KVINFER_ERR_BAD_FILE, kvinfer_inspect("/nonexistent/model.gguf", &info));
  EXPECT_EQ(info, nullptr);
}

TEST(CApiState, ForkContinuesBitForBit) {
  Handles h;
  h.open();
  const std::vector<int32_t> p = prompt_ids();
  ASSERT_OK(kvinfer_prefill(h.session, h.kv, p.data(), p.size(), nullptr));
  std::vector<int32_t> toks(p.size());
  size_t n = 0;
  EXPECT_STATUS(KVINFER_ERR_BUFFER_TOO_SMALL, kvinfer_kv_tokens(h.kv, toks.data(), p.size() - 1, &n));
  EXPECT_EQ(n, p.size());
  EXPECT_STATUS(KVINFER_OK, kvinfer_kv_tokens(h.kv, toks.data(), toks.size(), &n));
  EXPECT_EQ(toks, p);

  kvinfer_kv* fork = nullptr;
  ASSERT_OK(kvinfer_kv_copy(h.kv, 0, &fork));
  EXPECT_EQ(kvinfer_kv_size(fork), kvinfer_kv_size(h.kv));
  EXPECT_EQ(kvinfer_kv_capacity(fork), 64);
  kvinfer_kv* bigger = nullptr;
  ASSERT_OK(kvinfer_kv_copy(h.kv, 128, &bigger));
  EXPECT_EQ(kvinfer_kv_capacity(bigger), 128);
  const size_t vocab = static_cast<size_t>(kvinfer_model_vocab_size(h.model));
  const float* l = nullptr;
  ASSERT_OK(kvinfer_decode(h.session, h.kv, 42, &l));
  const std::vector<float> a(l, l + vocab);
  ASSERT_OK(kvinfer_decode(h.session, fork, 42, &l));
  EXPECT_TRUE(same_bits(a.data(), l, vocab));
  ASSERT_OK(kvinfer_decode(h.session, bigger, 42, &l));
  EXPECT_TRUE(same_bits(a.data(), l, vocab));
  kvinfer_kv* tiny = nullptr;
  EXPECT_NE(kvinfer_kv_copy(h.kv, 2, &tiny), KVINFER_OK);  // fewer positions than it holds
  EXPECT_EQ(tiny, nullptr);
  kvinfer_kv_free(fork);
  kvinfer_kv_free(bigger);
}

TEST(CApiState, SaveAndLoadContinueBitForBit) {
  Handles h;
  h.open();
  const std::vector<int32_t> p = prompt_ids();
  ASSERT_OK(kvinfer_prefill(h.session, h.kv, p.data(), p.size(), nullptr));
  const std::filesystem::path file = std::filesystem::temp_directory_path() / ("kvinfer_c_state_" + std::to_string(::getpid()));
  EXPECT_STATUS(KVINFER_OK, kvinfer_kv_save(h.kv, h.model, file.c_str()));
  kvinfer_kv* loaded = nullptr;
  ASSERT_OK(kvinfer_kv_load(h.model, file.c_str(), 0, &loaded));
  EXPECT_EQ(kvinfer_kv_size(loaded), static_cast<int64_t>(p.size()));
  EXPECT_EQ(kvinfer_kv_capacity(loaded), 64);
  std::vector<int32_t> toks(p.size());
  size_t n = 0;
  EXPECT_STATUS(KVINFER_OK, kvinfer_kv_tokens(loaded, toks.data(), toks.size(), &n));
  EXPECT_EQ(toks, p);
  const size_t vocab = static_cast<size_t>(kvinfer_model_vocab_size(h.model));
  const float* l = nullptr;
  ASSERT_OK(kvinfer_decode(h.session, h.kv, 42, &l));
  const std::vector<float> a(l, l + vocab);
  ASSERT_OK(kvinfer_decode(h.session, loaded, 42, &l));
  EXPECT_TRUE(same_bits(a.data(), l, vocab));
  kvinfer_kv_free(loaded);
  loaded = nullptr;
  EXPECT_NE(kvinfer_kv_load(h.model, file.c_str(), 4, &loaded), KVINFER_OK);  // fewer than saved
  EXPECT_EQ(loaded, nullptr);
  EXPECT_STATUS(KVINFER_ERR_BAD_FILE, kvinfer_kv_load(h.model, "/nonexistent/state.kv", 0, &loaded));
  std::filesystem::remove(file);

  // A save never replaces what is not a regular file (a rename used to put the state in place of
  // a FIFO, or of /dev/full as root): BAD_FILE naming it, the FIFO still a FIFO, no temporary.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("kvinfer_c_fifo_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::filesystem::path fifo = dir / "state.kv";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_STATUS(KVINFER_ERR_BAD_FILE, kvinfer_kv_save(h.kv, h.model, fifo.c_str()));
  EXPECT_NE(std::string(kvinfer_last_error()).find("a FIFO"), std::string::npos) << kvinfer_last_error();
  struct stat st {};
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()), 1);
  std::filesystem::remove_all(dir);
}

struct Log {
  std::vector<std::pair<kvinfer_log_level, std::string>> lines;
};

void log_line(kvinfer_log_level level, const char* message, void* user) {
  static_cast<Log*>(user)->lines.emplace_back(level, message);
}

TEST(CApiState, LogCallbackReceivesTheLoad) {
  Log log;
  ASSERT_OK(kvinfer_set_log_callback(log_line, &log, KVINFER_LOG_DEBUG));
  {
    Handles h;
    h.open();
  }
  ASSERT_OK(kvinfer_set_log_callback(nullptr, nullptr, KVINFER_LOG_INFO));
  ASSERT_FALSE(log.lines.empty());
  for (const auto& [level, line] : log.lines) {
    EXPECT_GE(level, KVINFER_LOG_DEBUG);
    EXPECT_LE(level, KVINFER_LOG_ERROR);
    EXPECT_FALSE(line.empty());
  }
  const size_t before = log.lines.size();
  Handles h;
  h.open();
  EXPECT_EQ(log.lines.size(), before);  // silenced
}

TEST(CApiState, NullArgumentsAreInvalidArgument) {
  Handles h;
  h.open();
  kvinfer_model_info* info = nullptr;
  kvinfer_kv* kv = nullptr;
  kvinfer_config c{};
  int32_t ids[4] = {1, 2, 3, 4};
  size_t n = 0;
  uint64_t u = 0;
  const kvinfer_status I = KVINFER_ERR_INVALID_ARGUMENT;
  EXPECT_STATUS(I, kvinfer_inspect(nullptr, &info));
  EXPECT_STATUS(I, kvinfer_inspect(kTiny.c_str(), nullptr));
  EXPECT_STATUS(I, kvinfer_model_info_config(nullptr, &c));
  EXPECT_STATUS(I, kvinfer_model_info_tensor(nullptr, 0, nullptr));
  EXPECT_STATUS(I, kvinfer_model_info_kv_bytes(nullptr, 1, KVINFER_DTYPE_DEFAULT, &u));
  EXPECT_STATUS(I, kvinfer_kv_copy(nullptr, 0, &kv));
  EXPECT_STATUS(I, kvinfer_kv_copy(h.kv, 0, nullptr));
  EXPECT_STATUS(I, kvinfer_kv_copy(h.kv, -1, &kv));
  EXPECT_STATUS(I, kvinfer_kv_tokens(nullptr, ids, 4, &n));
  EXPECT_STATUS(I, kvinfer_kv_tokens(h.kv, ids, 4, nullptr));
  EXPECT_STATUS(I, kvinfer_kv_save(nullptr, h.model, "/tmp/x"));
  EXPECT_STATUS(I, kvinfer_kv_save(h.kv, nullptr, "/tmp/x"));
  EXPECT_STATUS(I, kvinfer_kv_save(h.kv, h.model, nullptr));
  EXPECT_STATUS(I, kvinfer_kv_load(nullptr, "/tmp/x", 0, &kv));
  EXPECT_STATUS(I, kvinfer_kv_load(h.model, nullptr, 0, &kv));
  EXPECT_STATUS(I, kvinfer_kv_load(h.model, "/tmp/x", 0, nullptr));
  EXPECT_STATUS(I, kvinfer_kv_load(h.model, "/tmp/x", -1, &kv));
  EXPECT_EQ(kv, nullptr);
  EXPECT_STREQ(kvinfer_model_info_name(nullptr), "");
  EXPECT_STREQ(kvinfer_model_info_chat_template(nullptr), "");
  EXPECT_EQ(kvinfer_model_info_tensor_count(nullptr), 0u);
  EXPECT_EQ(kvinfer_model_info_weight_bytes(nullptr), 0u);
  EXPECT_EQ(kvinfer_model_info_weight_dtype(nullptr), KVINFER_DTYPE_DEFAULT);
  EXPECT_FALSE(kvinfer_model_info_has_tokenizer(nullptr));
  kvinfer_model_info_free(nullptr);
}

}  // namespace
}  // namespace kvinfer
