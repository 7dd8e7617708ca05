#include "common/launcher_environment.h"

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace mirrored {

std::optional<int> LauncherGeneration() {
  const char* value = std::getenv(kGenerationVariable);
  if (value == nullptr) return std::nullopt;
  int generation = 0;
  const char* end = value + std::strlen(value);
  auto [ptr, ec] = std::from_chars(value, end, generation);
  if (ec != std::errc() || ptr != end || generation < 0) return std::nullopt;
  return generation;
}

bool LauncherSaysTrainingEnded() {
  const char* value = std::getenv(kTrainingEndedVariable);
  return value != nullptr && std::string_view(value) == "1";
}

bool LauncherSignalsTheWholeJob() {
  const char* value = std::getenv(kWholeJobSignalledVariable);
  return value != nullptr && std::string_view(value) == "1";
}

namespace {

std::string DescribeTokenByte(unsigned char c) {
  if (c == '\n') return "a newline";
  if (c == '\r') return "a carriage return";
  if (c == '\t') return "a tab";
  if (c == ' ') return "a space";
  static const char kHex[] = "0123456789ABCDEF";
  return std::string("the byte 0x") + kHex[c >> 4] + kHex[c & 15];
}

}  // namespace

Status CheckJobToken(std::string_view token) {
  const std::string name = kJobTokenVariable;
  if (token.size() > kMaxJobTokenBytes) {
    return InvalidArgumentError(name + " is " + std::to_string(token.size()) + " bytes long, more than the " +
                                std::to_string(kMaxJobTokenBytes) + " a coordination call's header carries");
  }
  for (size_t i = 0; i < token.size(); ++i) {
    const auto c = static_cast<unsigned char>(token[i]);
    if (c > 0x20 && c < 0x7f) continue;
    std::string hint;
    if ((c == '\n' || c == '\r') && i + 2 >= token.size()) {
      hint = " (a token read from a file keeps its line end: strip it, e.g. `export " + name +
             "=$(tr -d '\\r\\n' < FILE)`)";
    }
    return InvalidArgumentError(name + " holds " + DescribeTokenByte(c) + " at byte " + std::to_string(i + 1) +
                                " of " + std::to_string(token.size()) +
                                ": the token travels as a gRPC header, which carries printable ASCII without "
                                "spaces only (0x21-0x7E)" + hint);
  }
  return OkStatus();
}

int LauncherLivenessFd() {
  const char* v = std::getenv(kLivenessFdVariable);
  if (v == nullptr || *v == '\0') return -1;
  char* end = nullptr;
  const long fd = std::strtol(v, &end, 10);
  return *end == '\0' && fd >= 3 && fd < 1024 ? static_cast<int>(fd) : -1;
}

}  // namespace mirrored
