// A pass over a config file's text before toml++ parses it, for what toml++
// 3.3 (Debian 12's) turns into undefined behaviour instead of a parse error:
// a non-ASCII character where it looks for whitespace (toml++ issues #190
// and #295: is_non_ascii_horizontal_whitespace reaches __builtin_unreachable
// for most code points below U+0500). fuzz_config found it in one minute.
//
// TOML 1.0 allows non-ASCII characters only in strings and comments, so the
// pass rejects them anywhere else, and in a multi-line basic string right
// after a backslash (never a valid escape) or at the start of the text that
// follows a line-ending backslash (valid TOML that toml++ 3.3 misreads; the
// error says how to write it instead). Everything else is left to toml++.
#pragma once

#include <string_view>

#include "cairn/status.hpp"

namespace cairn {

// OK, or kConfig "TOML syntax error in <origin> (line L, column C): ...".
Status CheckTomlText(std::string_view text, std::string_view origin);

}  // namespace cairn
