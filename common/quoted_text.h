// Text from outside (TF_CONFIG values, file paths, host names) shown in a
// message: in double quotes, with every byte that could move a terminal's
// cursor, ring its bell or break a log line escaped, and bytes that are not
// UTF-8 shown as \xNN. Valid UTF-8 beyond ASCII passes unchanged.
//
//   QuotedText("h1")            == "\"h1\""
//   QuotedText("a\x1b[31mb")    == "\"a\\u001b[31mb\""
//   QuotedText("x\xff.json")    == "\"x\\xff.json\""
#pragma once

#include <string>
#include <string_view>

namespace mirrored {

std::string QuotedText(std::string_view text);

}  // namespace mirrored
