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
  // value starts. Elsewhere (inside a bare value such as `+/x"` or `8"a@='`,
  // after a value, in text toml++ rejects) it is an ordinary character, and
  // a non-ASCII character there is refused. Erring towards "not a string"
  // only refuses text that toml++ refuses anyway. Where keys and values
  // start is TOML's line grammar: a key (bare, quoted or dotted) at the
  // start of a line, in a table header or in an inline table after `{` or
  // `,`; a value after `=`, and in an array after `[` or `,`.
  Status Run() {
    Pos pos = Pos::kKey;
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (NonAscii(c)) return Error("non-ASCII character outside a string or comment (TOML allows them only there)");
      if (pos == Pos::kBare) {  // a bare value runs to whitespace or a delimiter
        if (std::string_view(" \t\r\n#,]}").find(c) != std::string_view::npos) {
          pos = Pos::kAfter;
        } else {
          Advance();
        }
        continue;
      }
      if (c == '#') {
        SkipTo('\n');
      } else if (c == '\n') {
        Advance();
        if (nest_.empty()) {  // inside an array a newline is whitespace
          pos = Pos::kKey;
          header_ = false;
        }
      } else if (c == ' ' || c == '\t' || c == '\r') {
        Advance();
      } else if ((c == '"' || c == '\'') && (pos == Pos::kKey || pos == Pos::kValue)) {
        CAIRN_RETURN_IF_ERROR(String(c));
        pos = pos == Pos::kKey ? Pos::kKeyEnd : Pos::kAfter;
      } else {
        pos = Structure(pos, c);
      }
    }
    return Status::Ok();
  }

 private:
  // kKey: a key may start; kKeyEnd: after a key (`.`, `=` or a header's `]`
  // next); kValue: a value may start; kBare: in a bare value; kAfter: after
  // a value, or in text toml++ rejects (no string starts until the line ends).
  enum class Pos { kKey, kKeyEnd, kValue, kBare, kAfter };

  static bool BareKeyChar(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  }

  // One ASCII character outside strings, comments and whitespace at `pos`:
  // consumed, and the position after it.
  Pos Structure(Pos pos, char c) {
    const char open = nest_.empty() ? '\0' : nest_.back();
    switch (pos) {
      case Pos::kKey:
        if (c == '[' && nest_.empty() && !header_) {  // [table] or [[array of tables]]
          header_ = true;
          Skip(Run('[') >= 2 ? 2 : 1);
          return Pos::kKey;
        }
        if (BareKeyChar(c)) {
          while (BareKeyChar(At(i_))) Advance();
          return Pos::kKeyEnd;
        }
        if (c == '}' && open == '{') nest_.pop_back();  // {}
        Advance();
        return Pos::kAfter;
      case Pos::kKeyEnd:
        Advance();
        if (c == '.') return Pos::kKey;
        if (c == '=' && !header_) return Pos::kValue;
        if (c == ']' && header_) {
          if (At(i_) == ']') Advance();
          header_ = false;
        }
        return Pos::kAfter;
      case Pos::kValue:
        if (c == '[' || c == '{') {
          nest_.push_back(c);
          Advance();
          return c == '[' ? Pos::kValue : Pos::kKey;
        }
        if (c == ']' && open == '[') {  // []
          nest_.pop_back();
          Advance();
          return Pos::kAfter;
        }
        return Pos::kBare;  // consumed by Run
      case Pos::kBare:
      case Pos::kAfter:
        break;
    }
    Advance();
    if (c == ',' && open != '\0') return open == '[' ? Pos::kValue : Pos::kKey;
    if ((c == ']' && open == '[') || (c == '}' && open == '{')) nest_.pop_back();
    return Pos::kAfter;
  }

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
  std::string nest_;     // the open arrays ('[') and inline tables ('{'), innermost last
  bool header_ = false;  // in a [table] header
};

}  // namespace

Status CheckTomlText(std::string_view text, std::string_view origin) {
  return Scanner(text, origin).Run();
}

}  // namespace cairn
