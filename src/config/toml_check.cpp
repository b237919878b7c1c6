// CheckTomlText (toml_check.hpp): a small scanner that knows only where
// TOML's strings and comments begin and end (docs/config.md links the spec).
#include "config/toml_check.hpp"

#include <algorithm>
#include <cstddef>
#include <string>

namespace cairn {
namespace {

class Scanner {
 public:
  Scanner(std::string_view text, std::string_view origin) : s_(text), origin_(origin) {}

  // A quote opens a string only where toml++ parses one: where a key or a
  // value starts. Elsewhere (inside a bare value such as `+/x"`) toml++ scans
  // on, so for this pass the quote is an ordinary character. Erring towards
  // "not a string" only rejects text that toml++ rejects anyway.
  Status Run() {
    char prev = '\n';  // the last character outside strings that is not a space or tab
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '#') {
        SkipTo('\n');
      } else if ((c == '"' || c == '\'') && std::string_view("\n=[{,.").find(prev) != std::string_view::npos) {
        CAIRN_RETURN_IF_ERROR(String(c));
        prev = c;
      } else if (NonAscii(c)) {
        return Error("non-ASCII character outside a string or comment (TOML allows them only there)");
      } else {
        if (c != ' ' && c != '\t' && c != '\r') prev = c;
        Advance();
      }
    }
    return Status::Ok();
  }

 private:
  static bool NonAscii(char c) { return static_cast<unsigned char>(c) >= 0x80; }
  char At(size_t k) const { return k < s_.size() ? s_[k] : '\0'; }
  size_t Run(char q) const {  // length of the run of q starting at i_
    size_t n = 0;
    while (At(i_ + n) == q) ++n;
    return n;
  }
  void Advance() {
    if (s_[i_] == '\n') {
      ++line_;
      line_start_ = i_ + 1;
    }
    ++i_;
  }
  void Skip(size_t n) {
    for (size_t k = 0; k < n && i_ < s_.size(); ++k) Advance();
  }
  void SkipTo(char end) {
    while (i_ < s_.size() && s_[i_] != end) Advance();
  }
  void SkipWhile(std::string_view chars) {
    while (i_ < s_.size() && chars.find(s_[i_]) != std::string_view::npos) Advance();
  }

  // A string from its opening quote(s) to past its closing one(s). Single-line
  // strings also end at a newline: toml++ reports those.
  Status String(char q) {
    const bool multi = Run(q) >= 3;
    const bool basic = q == '"';
    Skip(multi ? 3 : 1);
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == q && (!multi || Run(q) >= 3)) {
        // A closing run may carry one or two quotes of content; toml++
        // reads at most five.
        Skip(multi ? std::min<size_t>(Run(q), 5) : 1);
        return Status::Ok();
      }
      if (c == '\n' && !multi) return Status::Ok();
      if (c == '\\' && basic) {
        Advance();
        bool line_end = false;
        if (multi) CAIRN_RETURN_IF_ERROR(MultiLineEscape(&line_end));
        if (!line_end && i_ < s_.size() && s_[i_] != '\n') Advance();  // the escaped character
        continue;
      }
      Advance();
    }
    return Status::Ok();
  }

  // After a backslash in a multi-line basic string: toml++ 3.3 classifies the
  // next character, and after a line-ending backslash the first one that
  // follows the skipped whitespace, with the broken whitespace table.
  // *line_end: it was one; the scan goes on from the character after it.
  Status MultiLineEscape(bool* line_end) {
    const size_t start = i_;
    SkipWhile(" \t");
    if (NonAscii(At(i_))) return Error("non-ASCII character after a backslash (not a TOML escape)");
    if (i_ == start && At(i_) != '\r' && At(i_) != '\n') return Status::Ok();
    *line_end = true;
    SkipWhile(" \t\r\n");
    if (NonAscii(At(i_))) {
      return Error("non-ASCII character first after a line-ending backslash: toml++ 3.3 misreads "
                   "it; keep it on the line before or write it as \\uXXXX");
    }
    return Status::Ok();
  }

  Status Error(const std::string& what) const {
    size_t column = 1;  // in characters, as toml++ counts them
    for (size_t k = line_start_; k < i_; ++k) column += (static_cast<unsigned char>(s_[k]) & 0xC0) != 0x80;
    return Status::Config("TOML syntax error in " + std::string(origin_) + " (line " +
                          std::to_string(line_) + ", column " + std::to_string(column) + "): " + what);
  }

  std::string_view s_;
  std::string_view origin_;
  size_t i_ = 0;
  size_t line_ = 1;
  size_t line_start_ = 0;
};

}  // namespace

Status CheckTomlText(std::string_view text, std::string_view origin) {
  return Scanner(text, origin).Run();
}

}  // namespace cairn
