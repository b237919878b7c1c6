// The values a configuration key takes, parsed the same way in a TOML file
// and in a CAIRN_* variable (values.hpp).
#include "config/values.hpp"

#include <pwd.h>
#include <unistd.h>

#include <cctype>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace cairn::config_values {

// "0600", "600", "0o600" -> 0600. Values above 07777 are rejected here;
// Validate() narrows to 0777.
Result<uint32_t> ParseMode(std::string_view text) {
  std::string_view s = text;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'o' || s[1] == 'O')) s.remove_prefix(2);
  if (s.empty() || s.size() > 6) {
    return Status::Config("bad file mode '" + std::string(text) +
                          "': expected octal digits like 0600");
  }
  uint32_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '7') {
      return Status::Config("bad file mode '" + std::string(text) +
                            "': expected octal digits like 0600");
    }
    v = v * 8 + static_cast<uint32_t>(c - '0');
  }
  if (v > 07777)
    return Status::Config("bad file mode '" + std::string(text) + "': more than 07777");
  return v;
}

// Decimal integer in [lo, hi], nothing else (no sign games, no trailing text).
bool ParseInt(std::string_view s, int64_t lo, int64_t hi, int64_t* out) {
  if (s.empty()) return false;
  bool neg = s[0] == '-';
  if (neg) s.remove_prefix(1);
  if (s.empty() || s.size() > 18) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (neg) v = -v;
  if (v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool ParseBool(std::string_view s, bool* out) {
  std::string l(s);
  for (char& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (l == "1" || l == "true" || l == "yes" || l == "on") {
    *out = true;
    return true;
  }
  if (l == "0" || l == "false" || l == "no" || l == "off") {
    *out = false;
    return true;
  }
  return false;
}

std::string OctalString(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0%o", v);
  return buf;
}

// Lexical normal form for comparing directories: no "//", no "." segments,
// ".." resolved lexically, no trailing '/'.
std::string NormalizePath(const std::string& p) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i <= p.size()) {
    size_t j = p.find('/', i);
    if (j == std::string::npos) j = p.size();
    std::string seg = p.substr(i, j - i);
    if (seg == "..") {
      if (!parts.empty() && parts.back() != "..") {
        parts.pop_back();
      } else if (p.empty() || p[0] != '/') {
        parts.push_back(seg);
      }
    } else if (!seg.empty() && seg != ".") {
      parts.push_back(seg);
    }
    i = j + 1;
  }
  std::string out = (!p.empty() && p[0] == '/') ? "/" : "";
  for (size_t k = 0; k < parts.size(); ++k) out += (k ? "/" : "") + parts[k];
  return out.empty() ? "." : out;
}

std::string MakeAbsolute(const std::string& p) {
  if (p.empty() || p[0] == '/') return p;
  std::string cwd(PATH_MAX, '\0');
  if (::getcwd(cwd.data(), cwd.size()) == nullptr) return p;  // keep it relative
  cwd.resize(std::strlen(cwd.c_str()));
  return NormalizePath(cwd + "/" + p);
}

// The user name for the default scratch directory, reduced to [A-Za-z0-9._-].
std::string UserName() {
  std::string name;
  long bufsize = ::sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buf(bufsize > 0 ? static_cast<size_t>(bufsize) : 16384);
  struct passwd pw;
  struct passwd* found = nullptr;
  if (::getpwuid_r(::geteuid(), &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr &&
      found->pw_name != nullptr) {
    name = found->pw_name;
  } else if (const char* user = std::getenv("USER"); user != nullptr) {
    name = user;
  }
  for (char& c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  if (name.empty()) name = "uid" + std::to_string(::geteuid());
  return name;
}

}  // namespace cairn::config_values
