#include "common/json_depth.h"

namespace mirrored {

std::optional<size_t> JsonNestingPastLimit(std::string_view text, size_t max_depth) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped byte cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

std::string JsonTooDeepMessage(size_t offset, size_t max_depth) {
  return "nests more than " + std::to_string(max_depth) + " levels deep (at byte " + std::to_string(offset) +
         "); nothing mirrored reads nests that deep (a damaged or hostile input)";
}

}  // namespace mirrored
