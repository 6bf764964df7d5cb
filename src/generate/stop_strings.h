#pragma once
// Holds back generated text that may be the start of a stop string, so that no part of a stop
// string is ever printed, and cuts the text at the first stop string.
#include <string>
#include <string_view>
#include <vector>

namespace kvinfer {

class StopStringFilter {
 public:
  explicit StopStringFilter(std::vector<std::string> stops);  // throws on an empty stop string

  // Appends `text`; returns what is now safe to emit. After a stop string completes, matched()
  // is true and the return value ends just before it. `final` releases everything held.
  std::string push(std::string_view text, bool final);
  bool matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;  // never contains a whole stop string
  bool matched_ = false;
};

}  // namespace kvinfer
