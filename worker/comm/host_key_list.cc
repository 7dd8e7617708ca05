#include "worker/comm/host_key_list.h"

#include <cstddef>

namespace mirrored {

std::string JoinHostKeys(const std::vector<std::string>& keys) {
  std::string list;
  for (const std::string& key : keys) list += std::to_string(key.size()) + ":" + key;
  return list;
}

StatusOr<std::vector<std::string>> SplitHostKeys(const std::string& list, int expected) {
  std::vector<std::string> keys;
  size_t at = 0;
  while (at < list.size()) {
    const size_t colon = list.find(':', at);
    size_t length = 0;
    bool digits = colon != std::string::npos && colon > at && colon - at <= 9;
    for (size_t i = at; digits && i < colon; ++i) {
      digits = list[i] >= '0' && list[i] <= '9';
      length = length * 10 + static_cast<size_t>(list[i] - '0');
    }
    if (!digits || length > list.size() - colon - 1) {
      return InvalidArgumentError("the tasks' host list is damaged at byte " + std::to_string(at) + " of " +
                                  std::to_string(list.size()));
    }
    keys.push_back(list.substr(colon + 1, length));
    at = colon + 1 + length;
    if (static_cast<int>(keys.size()) > expected) break;  // named below; a damaged list grows no further
  }
  if (static_cast<int>(keys.size()) != expected) {
    return InvalidArgumentError("the tasks' host list names " + std::to_string(keys.size()) + " tasks, not " +
                                std::to_string(expected));
  }
  return keys;
}

}  // namespace mirrored
