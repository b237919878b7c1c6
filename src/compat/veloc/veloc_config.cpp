// VELOC's configuration file over Cairn's Config (docs/veloc.md). VELOC reads
// it with an INI reader: `key = value` lines, `;` or `#` comments, no
// sections in use. Every key is declared once, in veloc_keys.def.
#include "compat/veloc/veloc_config.hpp"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <map>
#include <string_view>

namespace cairn::veloc {
namespace {

enum Use { kRequired, kMapped, kIgnored };

struct Key {
  const char* name;
  Use use;
  const char* doc;
};

constexpr Key kKeys[] = {
#define VELOC_KEY(key, use, doc) {#key, use, doc},
#include "compat/veloc/veloc_keys.def"
#undef VELOC_KEY
};

const Key* FindKey(std::string_view name) {
  for (const Key& k : kKeys) {
    if (name == k.name) return &k;
  }
  return nullptr;
}

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

// One value per key and where it came from ("file:line" or the variable).
struct Entry {
  std::string value;
  std::string where;
};
using Entries = std::map<std::string, Entry>;

Status ParseLines(const std::string& text, const std::string& origin, Entries* out) {
  size_t pos = 0;
  for (int line = 1; pos <= text.size(); ++line) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string l = Trim(std::string_view(text).substr(pos, nl - pos));
    pos = nl + 1;
    const std::string where = origin + ":" + std::to_string(line);
    if (l.empty() || l[0] == ';' || l[0] == '#') continue;
    if (l[0] == '[') {
      return Status::Config(where + ": '" + l + "': VELOC's configuration has no sections (key = value lines only)");
    }
    size_t eq = l.find_first_of("=:");
    if (eq == std::string::npos) {
      return Status::Config(where + ": '" + l + "' is not a key = value line");
    }
    std::string key = Trim(std::string_view(l).substr(0, eq));
    std::string value = Trim(std::string_view(l).substr(eq + 1));
    // An inline comment starts at a ';' or '#' after whitespace (as VELOC's INI reader).
    for (size_t i = 1; i < value.size(); ++i) {
      if ((value[i] == ';' || value[i] == '#') && std::isspace(static_cast<unsigned char>(value[i - 1]))) {
        value = Trim(std::string_view(value).substr(0, i));
        break;
      }
    }
    if (FindKey(key) == nullptr) {
      std::string known;
      for (const Key& k : kKeys) known += std::string(known.empty() ? "" : ", ") + k.name;
      return Status::Config(where + ": unknown key '" + key + "' (libcairn_veloc knows: " + known + ")");
    }
    if (auto it = out->find(key); it != out->end()) {
      return Status::Config(where + ": '" + key + "' is set twice (first at " + it->second.where + ")");
    }
    (*out)[key] = {value, where};
  }
  return Status::Ok();
}

// VELOC_<KEY>: the environment variable that overrides `key`.
std::string EnvName(const char* key) {
  std::string var = "VELOC_";
  for (const char* c = key; *c != '\0'; ++c) var += static_cast<char>(std::toupper(static_cast<unsigned char>(*c)));
  return var;
}

// VELOC_<KEY> overrides the file (e.g. VELOC_SCRATCH for scratch).
void ApplyEnvironment(Entries* entries) {
  for (const Key& k : kKeys) {
    const std::string var = EnvName(k.name);
    const char* v = std::getenv(var.c_str());
    if (v != nullptr && *v != '\0') (*entries)[k.name] = {v, "environment variable " + var};
  }
}

Result<int> Count(const Entries& e, const char* key) {
  auto it = e.find(key);
  if (it == e.end()) return 0;
  const std::string& v = it->second.value;
  errno = 0;
  char* end = nullptr;
  long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || n < 0 || n > INT_MAX) {
    return Status::Config(it->second.where + ": " + key + " = '" + v + "' is not a count (an integer >= 0; 0 = keep all)");
  }
  return static_cast<int>(n);
}

std::string Absolute(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof cwd) == nullptr) return path;
  return std::string(cwd) + "/" + path;
}

Result<VelocConfig> Build(Entries e) {
  ApplyEnvironment(&e);
  VelocConfig out;
  for (const Key& k : kKeys) {
    auto it = e.find(k.name);
    if (k.use == kRequired && (it == e.end() || it->second.value.empty())) {
      return Status::Config(std::string("VELOC configuration: '") + k.name + "' is missing or empty (" + k.doc +
                            "); set it in the file or in " + EnvName(k.name));
    }
    if (k.use == kIgnored && it != e.end()) {
      out.notes.push_back(it->second.where + ": '" + k.name + "' is ignored under Cairn (" + k.doc + ")");
    }
  }
  // Cairn's own settings first (its TOML file or its defaults, CAIRN_* on top).
  auto cc = e.find("cairn_config");
  std::string toml = cc == e.end() ? std::string() : Absolute(cc->second.value);
  Result<Config> base = LoadConfig(toml.empty() ? nullptr : toml.c_str());
  if (!base.ok()) return base.status().WithContext("VELOC configuration's cairn_config");
  out.cairn = std::move(base).value();
  out.cairn.scratch_dir = Absolute(e["scratch"].value);
  out.cairn.persistent_dir = Absolute(e["persistent"].value);
  if (auto m = e.find("mode"); m != e.end()) {
    if (m->second.value != "sync" && m->second.value != "async") {
      return Status::Config(m->second.where + ": mode = '" + m->second.value + "' is invalid, must be sync or async");
    }
    out.sync = m->second.value == "sync";
  }
  CAIRN_ASSIGN_OR_RETURN(int max_versions, Count(e, "max_versions"));
  CAIRN_ASSIGN_OR_RETURN(int scratch_versions, Count(e, "scratch_versions"));
  if (max_versions != scratch_versions && e.count("max_versions") != 0 && e.count("scratch_versions") != 0) {
    out.notes.push_back("max_versions (" + std::to_string(max_versions) + ") and scratch_versions (" +
                        std::to_string(scratch_versions) +
                        ") differ: Cairn keeps one count in both directories, the larger (0 = all)");
  }
  // 0 = keep all; Cairn keeps the larger of the two counts in both directories.
  const bool all = (e.count("max_versions") == 0 || max_versions == 0) &&
                   (e.count("scratch_versions") == 0 || scratch_versions == 0);
  out.cairn.keep_versions = all ? INT_MAX : std::max(max_versions, scratch_versions);
  if (Status s = out.cairn.Validate(); !s.ok()) return s.WithContext("VELOC configuration");
  return out;
}

}  // namespace

Result<VelocConfig> ParseVelocConfig(const std::string& text, const std::string& origin) {
  Entries e;
  CAIRN_RETURN_IF_ERROR(ParseLines(text, origin, &e));
  return Build(std::move(e));
}

Result<VelocConfig> LoadVelocConfig(const char* path) {
  if (path == nullptr || *path == '\0') {
    return Status::Config("VELOC configuration: no file given (cfg_file is NULL or empty)");
  }
  std::FILE* f = std::fopen(path, "rbe");
  if (f == nullptr) {
    return Status::Config(std::string("cannot open VELOC configuration file '") + path + "': " + std::strerror(errno));
  }
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return Status::Config(std::string("cannot read VELOC configuration file '") + path + "'");
  return ParseVelocConfig(text, path);
}

}  // namespace cairn::veloc
