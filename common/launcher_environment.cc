#include "common/launcher_environment.h"

#include <charconv>
#include <cstdlib>
#include <cstring>
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

int LauncherLivenessFd() {
  const char* v = std::getenv(kLivenessFdVariable);
  if (v == nullptr || *v == '\0') return -1;
  char* end = nullptr;
  const long fd = std::strtol(v, &end, 10);
  return *end == '\0' && fd >= 3 && fd < 1024 ? static_cast<int>(fd) : -1;
}

}  // namespace mirrored
