#include "generate/stop_strings.h"

#include <algorithm>

#include "kvinfer/error.h"

namespace kvinfer {

StopStringFilter::StopStringFilter(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (const std::string& s : stops_)
    if (s.empty()) throw Error(ErrorKind::InvalidArgument, "stop strings must not be empty");
}

std::string StopStringFilter::push(std::string_view text, bool final) {
  if (matched_) return {};
  held_ += text;
  size_t cut = std::string::npos;  // the earliest stop string in the held text
  for (const std::string& s : stops_) cut = std::min(cut, held_.find(s));
  if (cut != std::string::npos) {
    matched_ = true;
    std::string out = held_.substr(0, cut);
    held_.clear();
    return out;
  }
  size_t keep = 0;  // the longest tail of held_ that a stop string starts with
  if (!final)
    for (const std::string& s : stops_)
      for (size_t k = std::min(s.size() - 1, held_.size()); k > keep; --k)
        if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
          keep = k;
          break;
        }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

}  // namespace kvinfer
