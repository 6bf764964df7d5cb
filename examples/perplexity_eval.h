#pragma once
// What kvinfer-perplexity computes, apart from its command line (tests/test_perplexity_cli.cpp and
// docs/perplexity.md): the windows a text is cut into, the log-softmax and negative log-likelihood
// in double, the saved-logits file (--save-logits, --kl-base) and the statistics of a comparison.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/output_file.h"

namespace ppl {

// ---- windows -------------------------------------------------------------------------------

// The shortest window: it scores n - 1 - n/2 >= 3 positions.
inline constexpr int64_t kMinWindow = 8;

// A window of n tokens scores positions [n/2, n - 1): position i predicts token i + 1, so every
// scored token has at least n/2 tokens of context (llama.cpp's perplexity does the same).
constexpr int64_t first_scored(int64_t n) { return n / 2; }
constexpr int64_t scored_per_window(int64_t n) { return n - 1 - n / 2; }

struct Windows {
  int64_t n = 0;                // tokens per window
  int64_t count = 0;            // windows
  std::vector<int32_t> tokens;  // count × n ids, window after window, each as it is evaluated
};

// Consecutive, non-overlapping windows of n tokens of `ids` (a trailing part shorter than n is
// dropped), at most max_windows of them (0: all). With a BOS id, each window's first token is
// replaced by it. The caller checks that there is at least one.
Windows make_windows(std::span<const int32_t> ids, int64_t n, std::optional<int32_t> bos, int64_t max_windows);

// hash64 (src/core/hash.h) of the windows' ids, as little-endian int32: a saved file from another
// text, -c or --chunks has another hash.
uint64_t windows_hash(const Windows& w);

// ---- log-softmax ---------------------------------------------------------------------------

// One row of logits as log-probabilities, in double: log p_j = l_j - (m + log Σ_k exp(l_k - m)),
// m the largest logit. argmax: the first id of the largest logit.
struct LogProbs {
  std::vector<double> values;
  int32_t argmax = 0;
};
void log_softmax(std::span<const float> logits, LogProbs& out);

// ---- mean and its standard error -----------------------------------------------------------

struct MeanError {
  double mean = 0;
  double se = 0;  // its standard error s / sqrt(n), s² the sample variance (n - 1); 0 when n < 2
};
MeanError mean_and_stderr(std::span<const double> x);

// The perplexity of a run: exp(mean NLL), and its ± = ppl × stderr(NLL) (first-order propagation).
struct Perplexity {
  double mean_nll = 0, nll_stderr = 0, ppl = 0, ppl_stderr = 0;
};
Perplexity perplexity(std::span<const double> nll);

// The value of nearest rank p (0 < p <= 100) of `sorted` (ascending, not empty):
// sorted[ceil(p/100 × n) - 1]. The median is p = 50 (for even n the lower middle value).
double nearest_rank(std::span<const double> sorted, double p);

// ---- the saved-logits file -----------------------------------------------------------------
//
// Little-endian. A 64-byte header:
//   0  char[6]   magic "KVPPL1"
//   6  uint16    version (2; version 1 files, without the checksums, are still read)
//   8  int64     vocab: log-probs per position
//  16  int64     window: tokens per window (-c)
//  24  int64     scored: positions saved (windows × scored_per_window(window))
//  32  uint64    windows_hash
//  40  char[16]  the KV cache dtype of the run that wrote it, NUL-padded (shown, not checked)
//  56  uint64    hash64 of bytes 0 .. 56
// then per scored position, in order, a record of 16 + 2 × vocab + 8 bytes:
//   f32 max, the largest log-probability; f32 scale = 24/65535; f32 the exact log-probability of
//   the correct next token; int32 argmax; uint16 q[vocab]: log p_j ≈ max - 65535·scale + q_j·scale,
//   so q spans [max - 24, max] and a log-prob below max - 24 is stored as 0 (clamped); uint64
//   hash64 of the record's other bytes seeded with its position (record_checksum), so that a
//   damaged, truncated-and-padded or reordered file is refused at the position it goes wrong.
// Version 1: a 56-byte header without its hash, records without theirs.
inline constexpr char kMagic[6] = {'K', 'V', 'P', 'P', 'L', '1'};
inline constexpr uint16_t kVersion = 2;
inline constexpr uint64_t kHeaderBytes = 64;
inline constexpr uint64_t kHeaderBytesV1 = 56;
inline constexpr double kRange = 24.0;  // nats below the largest log-probability that are kept
constexpr uint64_t record_bytes(int64_t vocab, uint16_t version = kVersion) {
  return 16 + 2 * static_cast<uint64_t>(vocab) + (version >= 2 ? 8 : 0);
}
// The checksum of position `index`'s record (its bytes but the checksum).
uint64_t record_checksum(const unsigned char* record, size_t bytes, int64_t index);

struct Header {
  int64_t vocab = 0, window = 0, scored = 0;
  uint64_t hash = 0;
  std::string kv_dtype;  // at most 15 bytes
};

struct SavedPosition {
  float max_logprob = 0, scale = 0, correct_logprob = 0;
  int32_t argmax = 0;
  std::vector<uint16_t> q;  // vocab

  // The log-probability q_j stands for, and whether it was clamped (q_j == 0: at or below the floor).
  double floor() const { return static_cast<double>(max_logprob) - 65535.0 * static_cast<double>(scale); }
  double logprob(int64_t j) const { return floor() + static_cast<double>(q[static_cast<size_t>(j)]) * scale; }
};

// What --save-logits stores for one position.
void quantize_position(const LogProbs& lp, int32_t correct, SavedPosition& out);

// Writes the file at `path` through kvinfer::OutputFile: a temporary file beside it, renamed over
// it by finish() (a run that fails or is interrupted leaves an existing file as it was, and no
// temporary). A path that is a device, FIFO or directory is refused before anything is written.
// Every write is checked: a full disk is an error naming the file (kvinfer::Error, BadFile).
class Writer {
 public:
  Writer(const std::filesystem::path& path, const Header& header);
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;
  void write(const SavedPosition& p);
  // Checks that `scored` records were written, syncs, closes and renames. Returns the file's bytes.
  uint64_t finish();

 private:
  void put(const void* p, size_t n);  // buffered
  void flush();
  kvinfer::OutputFile out_;
  Header header_;
  int64_t written_ = 0;
  std::vector<unsigned char> buffer_, record_;
};

// Reads a saved file. The constructor reads and checks the header against itself (magic, version,
// fields in range, and the file's size against what the header implies: a truncated file or one
// with trailing bytes is refused before any record is read); check() then checks it against this
// run. Errors are kvinfer::Error (BadFile) naming the file and the field.
class Reader {
 public:
  explicit Reader(const std::filesystem::path& path);
  ~Reader();
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;
  const Header& header() const { return header_; }
  uint16_t version() const { return version_; }  // 1: no checksums to check
  // The header against this run: vocab, window, scored and hash, in that order.
  void check(const Header& run) const;
  // The next record, its fields checked (finite, argmax in the vocabulary).
  void next(SavedPosition& out);

 private:
  [[noreturn]] void bad(std::string_view field, const std::string& what) const;
  std::filesystem::path path_;
  int fd_ = -1;
  Header header_;
  uint16_t version_ = kVersion;
  uint64_t header_bytes_ = kHeaderBytes;
  uint64_t size_ = 0;
  int64_t read_ = 0;
  std::vector<unsigned char> buffer_;
};

// ---- comparison with a saved run -----------------------------------------------------------

// One position of --kl-base, in double. The base's distribution is its dequantised log-probs,
// renormalised over the ids not clamped (q > 0); a clamped id counts as probability 0 (its true
// probability is below e^-24 times the largest). This run's is its exact log-softmax.
struct PositionComparison {
  double kl = 0;          // KL(P_base ‖ P_this) = Σ_j p_base,j (log p_base,j - log p_this,j), nats
  bool same_top1 = false;  // the base's argmax == this run's argmax
  double max_abs_dp = 0;   // max_j |p_this,j - p_base,j|
  double dp_correct = 0;   // p_this(correct) - p_base(correct), the base's from its exact f32 log-prob
};
PositionComparison compare_position(const SavedPosition& base, const LogProbs& run, int32_t correct);

// The figures --kl-base reports.
struct KlSummary {
  int64_t positions = 0;
  MeanError kl;
  double kl_median = 0, kl_p99 = 0, kl_max = 0;  // nearest rank
  int64_t same_top1 = 0;
  double top1_percent = 0;
  double max_abs_dp_mean = 0, max_abs_dp_max = 0;
  double dp_correct_mean = 0;
};
KlSummary summarize(std::span<const PositionComparison> positions);

}  // namespace ppl
