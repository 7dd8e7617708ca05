#include "common/quoted_text.h"

#include <cstdio>

namespace mirrored {
namespace {

// Length of the valid UTF-8 sequence of two to four bytes at `s`, or 0.
size_t Utf8SequenceLength(std::string_view s) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = byte(0);
  size_t length = 0;
  unsigned min_code = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2, min_code = 0x80;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3, min_code = 0x800;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4, min_code = 0x10000;
  } else {
    return 0;
  }
  if (s.size() < length) return 0;
  unsigned code = lead & (0x7F >> length);
  for (size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i) & 0x3F);
  }
  const bool surrogate = code >= 0xD800 && code <= 0xDFFF;
  if (code < min_code || code > 0x10FFFF || surrogate) return 0;
  return length;
}

void AppendEscaped(std::string& out, const char* format, unsigned value) {
  char buffer[8];
  std::snprintf(buffer, sizeof buffer, format, value);
  out += buffer;
}

}  // namespace

std::string QuotedText(std::string_view text) {
  std::string out = "\"";
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      AppendEscaped(out, "\\u%04x", c);
    } else if (c >= 0x80) {
      const size_t length = Utf8SequenceLength(text.substr(i));
      const unsigned char next = length == 2 ? static_cast<unsigned char>(text[i + 1]) : 0;
      if (length == 0) {
        AppendEscaped(out, "\\x%02x", c);
      } else if (c == 0xC2 && next < 0xA0) {  // a C1 control such as CSI
        AppendEscaped(out, "\\u%04x", next);
        i += length;
        continue;
      } else {
        out.append(text.substr(i, length));
        i += length;
        continue;
      }
    } else {
      out += static_cast<char>(c);
    }
    ++i;
  }
  return out + "\"";
}

}  // namespace mirrored
