// A bound on how deeply a JSON text nests, checked before parsing it.
// nlohmann's serializer (and parts of its parser) recurse once per level, so
// a hostile file of [[[[... 100 000 levels (200 KB) overflows the stack: a
// model JSON, a checkpoint's state.json, a safetensors header. What the
// project reads nests a dozen levels at most (a Functional model's
// inbound_nodes), so 512 refuses nothing real.
//
//   if (auto at = JsonNestingPastLimit(text)) return Error(file + ": " + JsonTooDeepMessage(*at));
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace mirrored {

inline constexpr size_t kMaxJsonDepth = 512;

// The byte offset of the first '[' or '{' that opens level max_depth + 1,
// counting only brackets outside strings; nullopt when the text stays
// within max_depth. It does not validate the JSON otherwise.
std::optional<size_t> JsonNestingPastLimit(std::string_view text, size_t max_depth = kMaxJsonDepth);

// "nests more than 512 levels deep (at byte N); nothing mirrored reads nests
// that deep (a damaged or hostile input)".
std::string JsonTooDeepMessage(size_t offset, size_t max_depth = kMaxJsonDepth);

}  // namespace mirrored
