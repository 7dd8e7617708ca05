#include "worker/comm/wire_type.h"

namespace mirrored {

StatusOr<WireType> ParseWireType(const std::string& text) {
  if (text == "fp32") return WireType::kFp32;
  if (text == "bf16") return WireType::kBf16;
  if (text == "fp16") return WireType::kFp16;
  return InvalidArgumentError("--allreduce-dtype \"" + text + "\" is not one of fp32, bf16, fp16");
}

const char* WireTypeName(WireType w) {
  switch (w) {
    case WireType::kFp32: return "fp32";
    case WireType::kBf16: return "bf16";
    case WireType::kFp16: return "fp16";
  }
  return "?";
}

}  // namespace mirrored
