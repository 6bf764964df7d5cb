#include "tokenizer/pre_tokenizer.h"

#include <algorithm>

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace kvinfer {

namespace {

using Kind = PreTokenizerStep::Kind;

struct Cut {
  size_t begin, end;
  bool is_match;
};

// The matches and the gaps between them, covering [0, n).
void cover(size_t n, const std::vector<Span>& matches, bool invert, std::vector<Cut>& cuts) {
  cuts.clear();
  size_t prev = 0;
  for (const Span& m : matches) {
    if (prev < m.begin) cuts.push_back({prev, m.begin, invert});
    cuts.push_back({m.begin, m.end, !invert});
    prev = m.end;
  }
  if (prev < n) cuts.push_back({prev, n, invert});
}

// HF's NormalizedString::split: how matches join their neighbours.
void split(const Piece& piece, std::vector<Cut>& cuts, SplitBehavior behavior, std::vector<Piece>& out) {
  std::vector<Span> ranges;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::Isolated:
      for (const Cut& c : cuts) ranges.push_back({c.begin, c.end});
      break;
    case SplitBehavior::Removed:
      for (const Cut& c : cuts)
        if (!c.is_match) ranges.push_back({c.begin, c.end});
      break;
    case SplitBehavior::Contiguous:
      for (const Cut& c : cuts) {
        if (c.is_match == previous_match && !ranges.empty()) {
          ranges.back().end = c.end;
        } else {
          ranges.push_back({c.begin, c.end});
        }
        previous_match = c.is_match;
      }
      break;
    case SplitBehavior::MergedWithPrevious:
      for (const Cut& c : cuts) {
        if (c.is_match && !previous_match && !ranges.empty()) {
          ranges.back().end = c.end;
        } else {
          ranges.push_back({c.begin, c.end});
        }
        previous_match = c.is_match;
      }
      break;
    case SplitBehavior::MergedWithNext:
      for (size_t k = cuts.size(); k-- > 0;) {
        const Cut& c = cuts[k];
        if (c.is_match && !previous_match && !ranges.empty()) {
          ranges.back().begin = c.begin;
        } else {
          ranges.push_back({c.begin, c.end});
        }
        previous_match = c.is_match;
      }
      std::reverse(ranges.begin(), ranges.end());
      break;
  }
  for (const Span& r : ranges) {
    if (r.end > r.begin) out.push_back({piece.text.substr(r.begin, r.end - r.begin), piece.first && r.begin == 0});
  }
}

// Every character for which `pred` holds is a match of its own.
template <typename Pred>
void char_matches(std::string_view s, Pred pred, std::vector<Span>& out) {
  out.clear();
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8::sequence_length(s, i);
    if (n && pred(utf8::decode(s, i, n))) out.push_back({i, i + n});
    i += n ? n : 1;
  }
}

std::string replace_spaces(std::string_view s, const std::string& replacement) {
  std::string out;
  out.reserve(s.size() + 8);
  for (char c : s) {
    if (c == ' ') {
      out += replacement;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace

void PreTokenizer::apply(std::string text, bool first, std::vector<Piece>& out) const {
  if (text.empty()) return;
  std::vector<Piece> pieces, next;
  pieces.push_back({std::move(text), first});
  std::vector<Span> matches;
  std::vector<Cut> cuts;
  for (const PreTokenizerStep& step : steps_) {
    next.clear();
    for (Piece& piece : pieces) {
      switch (step.kind) {
        case Kind::Split:
          step.pattern->find_all(piece.text, matches);
          cover(piece.text.size(), matches, step.invert, cuts);
          split(piece, cuts, step.behavior, next);
          break;
        case Kind::Digits:
          char_matches(piece.text, utf8::is_numeric, matches);
          cover(piece.text.size(), matches, false, cuts);
          split(piece, cuts, step.individual_digits ? SplitBehavior::Isolated : SplitBehavior::Contiguous, next);
          break;
        case Kind::Metaspace: {
          Piece p{replace_spaces(piece.text, step.replacement), piece.first};
          const bool starts = p.text.compare(0, step.replacement.size(), step.replacement) == 0;
          if (!starts && (step.prepend == PrependScheme::Always || (step.prepend == PrependScheme::First && p.first)))
            p.text = step.replacement + p.text;
          if (!step.split) {
            if (!p.text.empty()) next.push_back(std::move(p));
            break;
          }
          Pattern::literal(step.replacement).find_all(p.text, matches);
          cover(p.text.size(), matches, false, cuts);
          split(p, cuts, SplitBehavior::MergedWithNext, next);
          break;
        }
        case Kind::ByteLevel: {
          // (Not insert(0, " "): GCC 12 warns with a -Wrestrict false positive.)
          if (step.add_prefix_space && (piece.text.empty() || piece.text[0] != ' ')) piece.text = " " + piece.text;
          const size_t from = next.size();
          if (step.pattern) {
            step.pattern->find_all(piece.text, matches);
            cover(piece.text.size(), matches, false, cuts);
            split(piece, cuts, SplitBehavior::Isolated, next);
          } else if (!piece.text.empty()) {
            next.push_back(std::move(piece));
          }
          for (size_t k = from; k < next.size(); ++k) next[k].text = byte_level::encode(next[k].text);
          break;
        }
      }
    }
    pieces.swap(next);
  }
  for (Piece& p : pieces)
    if (!p.text.empty()) out.push_back(std::move(p));
}

}  // namespace kvinfer
