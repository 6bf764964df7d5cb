#include "perplexity_eval.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "core/hash.h"
#include "core/input_file.h"
#include "kvinfer/error.h"
#include "kvinfer/kv_plan.h"

namespace ppl {

namespace {

using kvinfer::Error;
using kvinfer::ErrorKind;

std::string count(int64_t n) { return kvinfer::format_count(n); }

// Little-endian fields (the hosts kvinfer builds on are little-endian: hash64 asserts it).
template <typename T>
void store(unsigned char* p, T v) {
  std::memcpy(p, &v, sizeof v);
}
template <typename T>
T load(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// All of [p, p + n) at `offset`, or false when the file ends first; errors other than the end throw.
bool read_fully(int fd, uint64_t offset, unsigned char* p, size_t n, const std::filesystem::path& path) {
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, std::min<size_t>(n, size_t{1} << 30), static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw Error(ErrorKind::BadFile, fmt::format("{}: cannot read: {}", path.string(), kvinfer::errno_text(errno)));
    if (r == 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return true;
}

}  // namespace

// ---- windows -------------------------------------------------------------------------------

Windows make_windows(std::span<const int32_t> ids, int64_t n, std::optional<int32_t> bos, int64_t max_windows) {
  Windows w;
  w.n = n;
  w.count = n > 0 ? static_cast<int64_t>(ids.size()) / n : 0;
  if (max_windows > 0) w.count = std::min(w.count, max_windows);
  w.tokens.assign(ids.begin(), ids.begin() + w.count * n);
  if (bos)
    for (int64_t k = 0; k < w.count; ++k) w.tokens[static_cast<size_t>(k * n)] = *bos;
  return w;
}

uint64_t windows_hash(const Windows& w) { return kvinfer::hash64(w.tokens.data(), w.tokens.size() * sizeof(int32_t)); }

// ---- log-softmax ---------------------------------------------------------------------------

void log_softmax(std::span<const float> logits, LogProbs& out) {
  size_t argmax = 0;
  for (size_t j = 1; j < logits.size(); ++j)
    if (logits[j] > logits[argmax]) argmax = j;
  const double m = logits[argmax];
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - m);
  const double lse = m + std::log(sum);
  out.values.resize(logits.size());
  for (size_t j = 0; j < logits.size(); ++j) out.values[j] = static_cast<double>(logits[j]) - lse;
  out.argmax = static_cast<int32_t>(argmax);
}

// ---- statistics ----------------------------------------------------------------------------

MeanError mean_and_stderr(std::span<const double> x) {
  MeanError r;
  if (x.empty()) return r;
  const auto n = static_cast<double>(x.size());
  double sum = 0;
  for (double v : x) sum += v;
  r.mean = sum / n;
  if (x.size() < 2) return r;
  double ss = 0;
  for (double v : x) ss += (v - r.mean) * (v - r.mean);
  r.se = std::sqrt(ss / (n - 1) / n);
  return r;
}

Perplexity perplexity(std::span<const double> nll) {
  const MeanError m = mean_and_stderr(nll);
  Perplexity p;
  p.mean_nll = m.mean;
  p.nll_stderr = m.se;
  p.ppl = std::exp(m.mean);
  p.ppl_stderr = p.ppl * m.se;
  return p;
}

double nearest_rank(std::span<const double> sorted, double p) {
  const auto n = static_cast<double>(sorted.size());
  const auto rank = static_cast<size_t>(std::max(1.0, std::ceil(p / 100.0 * n)));
  return sorted[std::min(rank, sorted.size()) - 1];
}

// ---- the saved-logits file -----------------------------------------------------------------

void quantize_position(const LogProbs& lp, int32_t correct, SavedPosition& out) {
  const auto argmax = static_cast<size_t>(lp.argmax);
  out.max_logprob = static_cast<float>(lp.values[argmax]);
  out.scale = static_cast<float>(kRange / 65535.0);
  out.correct_logprob = static_cast<float>(lp.values[static_cast<size_t>(correct)]);
  out.argmax = lp.argmax;
  out.q.resize(lp.values.size());
  const double floor = out.floor(), scale = out.scale;
  for (size_t j = 0; j < lp.values.size(); ++j) {
    const double v = std::nearbyint((lp.values[j] - floor) / scale);
    out.q[j] = static_cast<uint16_t>(std::clamp(v, 0.0, 65535.0));
  }
}

uint64_t record_checksum(const unsigned char* record, size_t bytes, int64_t index) {
  const uint64_t seed = kvinfer::hash64(&index, sizeof index);
  return kvinfer::hash64(record, bytes, seed);
}

Writer::Writer(const std::filesystem::path& path, const Header& header) : out_(path), header_(header) {
  unsigned char h[kHeaderBytes] = {};
  std::memcpy(h, kMagic, sizeof kMagic);
  store<uint16_t>(h + 6, kVersion);
  store<int64_t>(h + 8, header.vocab);
  store<int64_t>(h + 16, header.window);
  store<int64_t>(h + 24, header.scored);
  store<uint64_t>(h + 32, header.hash);
  std::memcpy(h + 40, header.kv_dtype.data(), std::min<size_t>(header.kv_dtype.size(), 15));
  store<uint64_t>(h + 56, kvinfer::hash64(h, 56));
  put(h, sizeof h);
}

Writer::~Writer() = default;

void Writer::put(const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  buffer_.insert(buffer_.end(), b, b + n);
  if (buffer_.size() >= (size_t{1} << 20)) flush();
}

void Writer::flush() {
  out_.write(buffer_.data(), buffer_.size());
  buffer_.clear();
}

void Writer::write(const SavedPosition& p) {
  if (written_ == header_.scored || static_cast<int64_t>(p.q.size()) != header_.vocab)
    throw Error(ErrorKind::InvalidArgument, fmt::format("{}: a position beyond the header's", out_.target().string()));
  std::vector<unsigned char>& r = record_;
  r.resize(record_bytes(header_.vocab));
  store<float>(r.data(), p.max_logprob);
  store<float>(r.data() + 4, p.scale);
  store<float>(r.data() + 8, p.correct_logprob);
  store<int32_t>(r.data() + 12, p.argmax);
  std::memcpy(r.data() + 16, p.q.data(), p.q.size() * sizeof(uint16_t));
  const size_t body = r.size() - 8;
  store<uint64_t>(r.data() + body, record_checksum(r.data(), body, written_));
  put(r.data(), r.size());
  ++written_;
}

uint64_t Writer::finish() {
  if (written_ != header_.scored)
    throw Error(ErrorKind::InvalidArgument, fmt::format("{}: {} positions written, the header says {}",
                                                        out_.target().string(), count(written_), count(header_.scored)));
  flush();
  out_.commit();
  return kHeaderBytes + static_cast<uint64_t>(written_) * record_bytes(header_.vocab);
}

Reader::Reader(const std::filesystem::path& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw Error(ErrorKind::BadFile, fmt::format("{}: {}", path.string(), kvinfer::errno_text(errno)));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) throw Error(ErrorKind::BadFile, fmt::format("{}: {}", path.string(), kvinfer::errno_text(errno)));
  if (!S_ISREG(st.st_mode))
    throw Error(ErrorKind::BadFile, fmt::format("{}: is {}, not a saved-logits file", path.string(),
                                                kvinfer::file_type_text(static_cast<unsigned>(st.st_mode))));
  size_ = static_cast<uint64_t>(st.st_size);
  unsigned char h[kHeaderBytes];
  if (size_ < kHeaderBytesV1 || !read_fully(fd_, 0, h, kHeaderBytesV1, path_))
    bad("header", fmt::format("the file has {} bytes, fewer than the {}-byte header: it is truncated or not a "
                              "kvinfer-perplexity --save-logits file",
                              count(static_cast<int64_t>(size_)), kHeaderBytesV1));
  if (std::memcmp(h, kMagic, sizeof kMagic) != 0)
    bad("magic", "not \"KVPPL1\": not a kvinfer-perplexity --save-logits file");
  version_ = load<uint16_t>(h + 6);
  if (version_ != 1 && version_ != kVersion)
    bad("version", fmt::format("{}, this kvinfer-perplexity reads versions 1 and {}", version_, kVersion));
  header_bytes_ = version_ == 1 ? kHeaderBytesV1 : kHeaderBytes;
  if (version_ >= 2) {
    if (size_ < kHeaderBytes || !read_fully(fd_, 0, h, sizeof h, path_))
      bad("header", fmt::format("the file has {} bytes, fewer than the {}-byte header: it is truncated",
                                count(static_cast<int64_t>(size_)), kHeaderBytes));
    if (load<uint64_t>(h + 56) != kvinfer::hash64(h, 56))
      bad("header checksum", "does not match the header: the file is damaged");
  }
  header_.vocab = load<int64_t>(h + 8);
  header_.window = load<int64_t>(h + 16);
  header_.scored = load<int64_t>(h + 24);
  header_.hash = load<uint64_t>(h + 32);
  if (header_.vocab < 1 || header_.vocab > INT32_MAX)
    bad("vocab", fmt::format("{} is not a vocabulary size (1 to {})", header_.vocab, count(INT32_MAX)));
  if (header_.window < kMinWindow || header_.window > INT32_MAX)
    bad("window", fmt::format("{} is not a window length ({} to {} tokens)", header_.window, kMinWindow, count(INT32_MAX)));
  if (header_.scored < 1 || header_.scored % scored_per_window(header_.window) != 0)
    bad("scored", fmt::format("{} is not a positive whole number of windows of {} scored positions", header_.scored,
                              scored_per_window(header_.window)));
  const auto* name = reinterpret_cast<const char*>(h + 40);
  const size_t len = strnlen(name, 16);
  if (len == 16) bad("kv_dtype", "not NUL-terminated");
  header_.kv_dtype.assign(name, len);
  uint64_t records = 0, expected = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(header_.scored), record_bytes(header_.vocab, version_), &records) ||
      __builtin_add_overflow(records, header_bytes_, &expected))
    bad("scored", fmt::format("{} positions of {} log-probs do not fit in 64 bits of bytes", count(header_.scored),
                              count(header_.vocab)));
  if (expected != size_)
    bad("size", fmt::format("the header promises {} bytes ({} positions of {} bytes after the {}-byte header), the file "
                            "has {}: {}",
                            count(static_cast<int64_t>(expected)), count(header_.scored),
                            record_bytes(header_.vocab, version_), header_bytes_, count(static_cast<int64_t>(size_)),
                            size_ < expected ? "it is truncated" : "it has trailing bytes"));
  buffer_.resize(record_bytes(header_.vocab, version_));
}

Reader::~Reader() {
  if (fd_ >= 0) ::close(fd_);
}

void Reader::bad(std::string_view field, const std::string& what) const {
  throw Error(ErrorKind::BadFile, fmt::format("{}: saved logits field '{}': {}", path_.string(), field, what));
}

void Reader::check(const Header& run) const {
  if (header_.vocab != run.vocab)
    bad("vocab", fmt::format("the file holds {} log-probs a position, this model's vocabulary has {} ids",
                             count(header_.vocab), count(run.vocab)));
  if (header_.window != run.window)
    bad("window", fmt::format("the file's windows are {} tokens, this run's {} (-c/--ctx)", count(header_.window),
                              count(run.window)));
  if (header_.scored != run.scored)
    bad("scored", fmt::format("the file has {} scored positions, this run {} (another text, -c/--ctx or --chunks)",
                              count(header_.scored), count(run.scored)));
  if (header_.hash != run.hash)
    bad("hash", fmt::format("the file's windows hold other token ids than this run's ({:016x}, this run {:016x}): "
                            "another text or tokenizer",
                            header_.hash, run.hash));
}

void Reader::next(SavedPosition& out) {
  const std::string field = fmt::format("position {}", read_);
  if (read_ == header_.scored) bad(field, "beyond the positions the file holds");
  const uint64_t offset = header_bytes_ + static_cast<uint64_t>(read_) * buffer_.size();
  if (!read_fully(fd_, offset, buffer_.data(), buffer_.size(), path_))
    bad(field, "the file ended before it: it shrank while it was read");
  const unsigned char* r = buffer_.data();
  if (version_ >= 2) {
    const size_t body = buffer_.size() - 8;
    if (load<uint64_t>(r + body) != record_checksum(r, body, read_))
      bad(field, "its checksum does not match its bytes: the file is damaged");
  }
  ++read_;
  out.max_logprob = load<float>(r);
  out.scale = load<float>(r + 4);
  out.correct_logprob = load<float>(r + 8);
  out.argmax = load<int32_t>(r + 12);
  out.q.resize(static_cast<size_t>(header_.vocab));
  std::memcpy(out.q.data(), r + 16, out.q.size() * sizeof(uint16_t));
  // The largest log-prob of a distribution over V ids lies in [-log V, 0]; the scale keeps the
  // floor within 64 nats of it (the writer's spans 24): every kept probability is a normal double.
  const double min_max = -std::log(static_cast<double>(header_.vocab)) - 1e-3;
  if (!(std::isfinite(out.max_logprob) && out.max_logprob <= 0 && out.max_logprob >= min_max))
    bad(field + " max", fmt::format("{} is not the largest log-probability of {} ids", out.max_logprob, count(header_.vocab)));
  if (!(std::isfinite(out.scale) && out.scale > 0 && 65535.0 * out.scale <= 64.0))
    bad(field + " scale", fmt::format("{} is not a step of at most 64/65535 nats", out.scale));
  if (!(std::isfinite(out.correct_logprob) && out.correct_logprob <= 0))
    bad(field + " correct", fmt::format("{} is not a log-probability", out.correct_logprob));
  if (out.argmax < 0 || out.argmax >= header_.vocab || out.q[static_cast<size_t>(out.argmax)] == 0)
    bad(field + " argmax", fmt::format("{} is not an id of the vocabulary whose log-prob is kept", out.argmax));
}

// ---- comparison ----------------------------------------------------------------------------

PositionComparison compare_position(const SavedPosition& base, const LogProbs& run, int32_t correct) {
  PositionComparison c;
  const size_t vocab = base.q.size();
  double sum = 0;
  for (size_t j = 0; j < vocab; ++j)
    if (base.q[j] != 0) sum += std::exp(base.logprob(static_cast<int64_t>(j)));
  const double log_z = std::log(sum);
  double kl = 0, max_abs = 0;
  for (size_t j = 0; j < vocab; ++j) {
    const double p_run = std::exp(run.values[j]);
    double p_base = 0;
    if (base.q[j] != 0) {
      const double lb = base.logprob(static_cast<int64_t>(j)) - log_z;
      p_base = std::exp(lb);
      kl += p_base * (lb - run.values[j]);
    }
    max_abs = std::max(max_abs, std::fabs(p_run - p_base));
  }
  c.kl = kl;
  c.same_top1 = base.argmax == run.argmax;
  c.max_abs_dp = max_abs;
  c.dp_correct = std::exp(run.values[static_cast<size_t>(correct)]) - std::exp(static_cast<double>(base.correct_logprob));
  return c;
}

KlSummary summarize(std::span<const PositionComparison> positions) {
  KlSummary s;
  s.positions = static_cast<int64_t>(positions.size());
  if (positions.empty()) return s;
  std::vector<double> kl;
  kl.reserve(positions.size());
  double max_abs_sum = 0, dp_sum = 0;
  for (const PositionComparison& p : positions) {
    kl.push_back(p.kl);
    s.same_top1 += p.same_top1 ? 1 : 0;
    max_abs_sum += p.max_abs_dp;
    s.max_abs_dp_max = std::max(s.max_abs_dp_max, p.max_abs_dp);
    dp_sum += p.dp_correct;
  }
  s.kl = mean_and_stderr(kl);
  std::sort(kl.begin(), kl.end());
  s.kl_median = nearest_rank(kl, 50);
  s.kl_p99 = nearest_rank(kl, 99);
  s.kl_max = kl.back();
  const auto n = static_cast<double>(positions.size());
  s.top1_percent = 100.0 * static_cast<double>(s.same_top1) / n;
  s.max_abs_dp_mean = max_abs_sum / n;
  s.dp_correct_mean = dp_sum / n;
  return s;
}

}  // namespace ppl
