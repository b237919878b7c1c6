// Configuration loading: defaults, then a TOML file, then CAIRN_* environment
// variables, then Validate(). docs/config.md is the user-facing description;
// keep the two in step.
//
// This is the only translation unit that includes toml++ (header-only mode,
// so no link dependency). toml++ reports syntax errors by throwing
// toml::parse_error; every exception is caught here and turned into a Status.
//
// toml++'s internal assertions are off: some input reaches them (fuzz_config
// found "[;" in a table header: toml++ 3.3 asserts in parse_key, then reports
// the syntax error when the assertion is skipped). With assertions on (builds
// without NDEBUG) the process would abort on a bad config file; with NDEBUG,
// toml++ turns each into __builtin_assume under clang, undefined behaviour
// when it does not hold. Without NDEBUG and with TOML_ASSERT defined, every
// one is a no-op and toml++ reaches its own error path.
#define TOML_HEADER_ONLY 1
#pragma push_macro("NDEBUG")
#undef NDEBUG
#define TOML_ASSERT(expr) static_assert(true)
#if __has_include(<toml++/toml.hpp>)
#include <toml++/toml.hpp>
#else
#include <toml++/toml.h>  // Debian's libtomlplusplus-dev 3.x ships only this name
#endif
#pragma pop_macro("NDEBUG")
#if !TOML_EXCEPTIONS
#error "config.cpp must be compiled with C++ exceptions (it catches toml::parse_error)"
#endif

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "cairn/config.hpp"
#include "config/environment.hpp"
#include "config/toml_check.hpp"
#include "config/values.hpp"

namespace cairn {
namespace {

using config_values::EnumKey;
using config_values::MakeAbsolute;
using config_values::NormalizePath;
using config_values::OctalString;
using config_values::ParseBool;
using config_values::ParseInt;
using config_values::ParseMode;
using config_values::Spellings;
using config_values::UserName;

constexpr uint64_t kMinBlockBytes = 64ull << 10;
constexpr uint64_t kMaxBlockBytes = 1ull << 30;
constexpr uint64_t kBlockAlignment = 4096;
constexpr uint64_t kMaxHashChunk = 64ull << 20;

// ---------------------------------------------------------------------------
// The TOML file.

const char* TypeName(toml::node_type t) {
  switch (t) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a floating-point number";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    default: return "nothing";
  }
}

// Edit distance, to suggest the intended key for a typo.
size_t Distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// One key of the schema: its applier reads the node into the Config, or
// returns why it cannot as the end of a sentence that begins "key 'a.b' in
// FILE (line N)": " must be a boolean, not a string" or ": bad size ...".
// "" means success.
struct KeySpec {
  const char* section;
  const char* name;
  std::function<std::string(const toml::node&, Config*)> apply;
};

std::string Expect(const std::string& what, const toml::node& n) {
  return " must be " + what + ", not " + TypeName(n.type());
}

std::string ReadString(const toml::node& n, std::string* out) {
  if (!n.is_string()) return Expect("a string", n);
  *out = n.as_string()->get();
  return "";
}

std::string ReadBool(const toml::node& n, bool* out) {
  if (!n.is_boolean()) return Expect("a boolean (true or false)", n);
  *out = n.as_boolean()->get();
  return "";
}

std::string ReadInt(const toml::node& n, int64_t lo, int* out) {
  if (!n.is_integer()) return Expect("an integer", n);
  int64_t v = n.as_integer()->get();
  if (v < lo || v > INT_MAX) return " must be an integer >= " + std::to_string(lo) + ", not " + std::to_string(v);
  *out = static_cast<int>(v);
  return "";
}

std::string ReadSize(const toml::node& n, uint64_t* out) {
  if (n.is_integer()) {
    int64_t v = n.as_integer()->get();
    if (v < 0) return " must not be negative, got " + std::to_string(v);
    *out = static_cast<uint64_t>(v);
    return "";
  }
  if (!n.is_string()) return Expect("a size (a string like \"512MiB\" or an integer number of bytes)", n);
  auto r = ParseSize(n.as_string()->get());
  if (!r.ok()) return ": " + r.status().message();
  *out = r.value();
  return "";
}

std::string ReadNumber(const toml::node& n, double* out) {
  if (n.is_floating_point()) {
    *out = n.as_floating_point()->get();
  } else if (n.is_integer()) {
    *out = static_cast<double>(n.as_integer()->get());
  } else {
    return Expect("a number", n);
  }
  return "";
}

std::string ReadMode(const toml::node& n, uint32_t* out) {
  if (n.is_integer()) {
    const auto& v = *n.as_integer();
    // A decimal 600 would silently mean 01130: only octal/hex/binary literals.
    if (v.flags() == toml::value_flags::none) {
      return " is the decimal integer " + std::to_string(v.get()) +
             "; write permission bits in octal: \"0600\" or 0o600";
    }
    if (v.get() < 0 || v.get() > 07777) return " must be between 0 and 0o7777";
    *out = static_cast<uint32_t>(v.get());
    return "";
  }
  if (!n.is_string()) return Expect("an octal string like \"0600\"", n);
  auto r = ParseMode(n.as_string()->get());
  if (!r.ok()) return ": " + r.status().message();
  *out = r.value();
  return "";
}

// One reader per member type (the table in config_keys.def picks by type).
std::string Read(const toml::node& n, int64_t, std::string* out) { return ReadString(n, out); }
std::string Read(const toml::node& n, int64_t, bool* out) { return ReadBool(n, out); }
std::string Read(const toml::node& n, int64_t lo, int* out) { return ReadInt(n, lo, out); }
std::string Read(const toml::node& n, int64_t, uint64_t* out) { return ReadSize(n, out); }
std::string Read(const toml::node& n, int64_t, uint32_t* out) { return ReadMode(n, out); }
std::string Read(const toml::node& n, int64_t, double* out) { return ReadNumber(n, out); }
// Every enumerated key (config_enums.def).
template <typename E>
requires std::is_enum_v<E> std::string Read(const toml::node& n, int64_t, E* out) {
  if (!n.is_string()) return Expect("a string (" + Spellings<E>() + ")", n);
  auto r = EnumKey<E>::Parse(n.as_string()->get());
  if (!r.ok()) return ": " + r.status().message();
  *out = r.value();
  return "";
}

const std::vector<KeySpec>& Schema() {
  static const std::vector<KeySpec> schema = {
#define CAIRN_CONFIG_KEY(section, key, member, lo, env, py, type, dflt, doc) \
  {#section, #key, [](const toml::node& n, Config* c) { return Read(n, lo, &c->member); }},
#include "cairn/config_keys.def"
#undef CAIRN_CONFIG_KEY
  };
  return schema;
}

std::string At(std::string_view origin, const toml::source_region& where) {
  std::string s = "in " + std::string(origin);
  if (where.begin.line > 0) s += " (line " + std::to_string(where.begin.line) + ")";
  return s;
}

// The closest known key for an unknown one, as " (did you mean 'a.b'?)".
std::string Suggest(std::string_view section, std::string_view key) {
  const KeySpec* best = nullptr;
  size_t best_d = 3;  // suggest only close matches
  for (const KeySpec& k : Schema()) {
    size_t d = section.empty() ? (key == k.name ? 0 : 99) : (section == k.section ? Distance(key, k.name) : 99);
    if (d < best_d) {
      best_d = d;
      best = &k;
    }
  }
  if (best == nullptr) return "";
  return std::string(" (did you mean '") + best->section + "." + best->name + "'?)";
}

Status ApplyTable(const toml::table& root, std::string_view origin, Config* config) {
  for (auto&& [section_key, section_node] : root) {
    const std::string section(section_key.str());
    bool known = false;
    for (const KeySpec& k : Schema()) known = known || section == k.section;
    if (!known) {
      return Status::Config("unknown key '" + section + "' " + At(origin, section_key.source()) +
                            Suggest("", section));
    }
    if (!section_node.is_table()) {
      return Status::Config("key '" + section + "' " + At(origin, section_key.source()) +
                            Expect("a table", section_node));
    }
    for (auto&& [key, node] : *section_node.as_table()) {
      const std::string name = section + "." + std::string(key.str());
      const KeySpec* spec = nullptr;
      for (const KeySpec& k : Schema()) {
        if (section == k.section && key.str() == k.name) spec = &k;
      }
      if (spec == nullptr) {
        return Status::Config("unknown key '" + name + "' " + At(origin, key.source()) +
                              Suggest(section, key.str()));
      }
      std::string err = spec->apply(node, config);
      if (!err.empty()) return Status::Config("key '" + name + "' " + At(origin, key.source()) + err);
    }
  }
  return Status::Ok();
}

Status SyntaxError(std::string_view origin, const toml::parse_error& e) {
  // toml++ quotes the offending text verbatim; keep the message on one line.
  std::string what;
  for (char c : e.description()) {
    if (c == '\n') {
      what += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      what += ' ';
    } else {
      what += c;
    }
  }
  return Status::Config("TOML syntax error in " + std::string(origin) + " (line " +
                        std::to_string(e.source().begin.line) + ", column " +
                        std::to_string(e.source().begin.column) + "): " + what);
}

Status ApplyToml(std::string_view text, std::string_view origin, Config* config) {
  CAIRN_RETURN_IF_ERROR(CheckTomlText(text, origin));  // what toml++ 3.3 cannot parse safely
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    return SyntaxError(origin, e);
  }
  return ApplyTable(root, origin, config);
}

Result<Config> Build(const std::string* toml_text, std::string_view origin, bool apply_environment) {
  Config config = DefaultConfig();
  if (toml_text != nullptr) CAIRN_RETURN_IF_ERROR(ApplyToml(*toml_text, origin, &config));
  if (apply_environment) CAIRN_RETURN_IF_ERROR(config_values::ApplyEnvironment(&config));
  config.scratch_dir = MakeAbsolute(config.scratch_dir);
  config.persistent_dir = MakeAbsolute(config.persistent_dir);
  config.trace_path = MakeAbsolute(config.trace_path);
  CAIRN_RETURN_IF_ERROR(config.Validate());
  return config;
}

Result<std::string> ReadFile(const std::string& path, const char* how) {
  std::FILE* f = std::fopen(path.c_str(), "rbe");  // 'e': O_CLOEXEC
  if (f == nullptr) {
    return Status::Config("cannot read config file '" + path + "'" + how + ": " + std::strerror(errno));
  }
  std::string text;
  char buf[8192];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
  bool failed = std::ferror(f) != 0;
  int err = errno;
  std::fclose(f);
  if (failed) return Status::Config("cannot read config file '" + path + "'" + how + ": " + std::strerror(err));
  return text;
}

}  // namespace

// ---------------------------------------------------------------------------

Config DefaultConfig() {
  Config c;
  std::string base = "/tmp";
  if (const char* tmp = std::getenv("TMPDIR"); tmp != nullptr && *tmp != '\0') base = tmp;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  c.scratch_dir = base + "/cairn-" + UserName() + "/scratch";
  return c;
}

namespace {

// "4096 bytes (4 KiB)".
std::string Bytes(uint64_t b) { return std::to_string(b) + " bytes (" + FormatSize(b) + ")"; }

// [storage]: the directories and the file mode.
Status ValidateStorage(const Config& c) {
  if (c.scratch_dir.empty()) {
    return Status::Config("storage.scratch is empty: set it in [storage] or with CAIRN_SCRATCH");
  }
  if (c.file_mode > 0777) {
    return Status::Config("storage.file_mode (CAIRN_FILE_MODE) is " + OctalString(c.file_mode) +
                          "; only permission bits (at most 0777) are allowed");
  }
  if ((c.file_mode & 0600) != 0600) {
    return Status::Config("storage.file_mode (CAIRN_FILE_MODE) is " + OctalString(c.file_mode) +
                          "; the owner must be able to read and write (0600 bits)");
  }
  if (!c.persistent_dir.empty() &&
      NormalizePath(c.persistent_dir) == NormalizePath(c.scratch_dir)) {
    return Status::Config("storage.persistent and storage.scratch are the same directory ('" +
                          c.persistent_dir +
                          "'); leave storage.persistent empty to have no persistent tier");
  }
  return Status::Ok();
}

// [host_cache], [retention], [history].
Status ValidateHostCache(const Config& c) {
  if (c.block_bytes % kBlockAlignment != 0) {
    return Status::Config("host_cache.block_size (CAIRN_BLOCK_SIZE) is " + Bytes(c.block_bytes) +
                          ", not a multiple of 4096 (direct I/O needs 4 KiB alignment)");
  }
  if (c.block_bytes < kMinBlockBytes || c.block_bytes > kMaxBlockBytes) {
    return Status::Config("host_cache.block_size (CAIRN_BLOCK_SIZE) is " + Bytes(c.block_bytes) +
                          "; it must be between 64 KiB and 1 GiB");
  }
  if (c.host_cache_bytes / 2 < c.block_bytes) {
    return Status::Config("host_cache.size (CAIRN_HOST_CACHE) is " + Bytes(c.host_cache_bytes) +
                          "; it must hold at least 2 blocks of host_cache.block_size (" +
                          FormatSize(c.block_bytes) + "), i.e. at least " +
                          FormatSize(2 * c.block_bytes) +
                          ", so that one block can be filled while another is flushed");
  }
  if (c.keep_versions < 1) {
    return Status::Config("retention.keep_versions (CAIRN_KEEP) is " +
                          std::to_string(c.keep_versions) + "; it must be at least 1");
  }
  if (c.copy_threads < -1 || c.copy_threads > 64) {
    return Status::Config("host_cache.copy_threads (CAIRN_COPY_THREADS) is " +
                          std::to_string(c.copy_threads) +
                          "; it must be between 0 and 64, or -1 for automatic");
  }
  if (c.host_cache_numa != "auto" && c.host_cache_numa != "on" && c.host_cache_numa != "off") {
    return Status::Config("host_cache.numa (CAIRN_HOST_CACHE_NUMA) is '" + c.host_cache_numa +
                          "'; it must be auto, on or off");
  }
  if (c.prefetch_depth < 0) {
    return Status::Config("history.prefetch_depth (CAIRN_PREFETCH_DEPTH) is " +
                          std::to_string(c.prefetch_depth) +
                          "; it must be at least 0 (0 = as many steps as fit in the cache)");
  }
  return Status::Ok();
}

// [device_cache].
Status ValidateDevice(const Config& c) {
  if (c.device_cache_bytes != 0 && c.device_cache_bytes < c.block_bytes) {
    return Status::Config("device_cache.size (CAIRN_DEVICE_CACHE) is " +
                          Bytes(c.device_cache_bytes) +
                          "; it must hold at least one block of host_cache.block_size (" +
                          FormatSize(c.block_bytes) + "), or be 0 for no device cache");
  }
  if (c.device_map_chunk_bytes == 0) {
    return Status::Config("device_cache.map_chunk is 0 bytes; it must be more than 0 (it is rounded up to "
                          "the GPU's allocation granularity)");
  }
  if (c.device < -1) {
    return Status::Config(
        "device_cache.device (CAIRN_DEVICE) is " + std::to_string(c.device) +
        "; it must be a device number >= 0, or -1 for the current context's device");
  }
  if (c.bounce_buffers < 1 || c.bounce_buffers > 64) {
    return Status::Config("device_cache.bounce_buffers is " + std::to_string(c.bounce_buffers) +
                          "; it must be between 1 and 64");
  }
  return Status::Ok();
}

// [checkpoint], [restart].
Status ValidateCheckpoint(const Config& c) {
  if (c.placement != "restore" && c.placement != "keep" && c.placement != "interleave") {
    return Status::Config("restart.placement (CAIRN_PLACEMENT) is '" + c.placement +
                          "'; it must be restore, keep or interleave");
  }
  if (c.zero_copy_order != "learned" && c.zero_copy_order != "address") {
    return Status::Config("checkpoint.zero_copy_order (CAIRN_ZERO_COPY_ORDER) is '" +
                          c.zero_copy_order + "'; it must be learned or address");
  }
  if (c.max_layers < 0) {
    return Status::Config("checkpoint.max_layers (CAIRN_MAX_LAYERS) is " +
                          std::to_string(c.max_layers) +
                          "; it must be at least 0 (0 = never layered)");
  }
  if (c.hash_chunk_bytes % kBlockAlignment != 0 || c.hash_chunk_bytes == 0 ||
      c.hash_chunk_bytes > kMaxHashChunk) {
    return Status::Config("checkpoint.hash_chunk (CAIRN_HASH_CHUNK) is " +
                          Bytes(c.hash_chunk_bytes) +
                          "; it must be a multiple of 4 KiB between 4 KiB and 64 MiB");
  }
  if (!(c.cow_fraction >= 0 && c.cow_fraction <= 1)) {
    char value[32];
    std::snprintf(value, sizeof value, "%g", c.cow_fraction);
    return Status::Config("checkpoint.cow_fraction (CAIRN_COW) is " + std::string(value) +
                          "; it must be between 0 and 1 (a fraction of the bytes a version protects)");
  }
  if (!(c.mtbf_s >= 0) || !std::isfinite(c.mtbf_s)) {
    char value[32];
    std::snprintf(value, sizeof value, "%g", c.mtbf_s);
    return Status::Config("checkpoint.mtbf_s (CAIRN_MTBF) is " + std::string(value) +
                          "; it must be a number of seconds >= 0 (0 = not set)");
  }
  return Status::Ok();
}

// The ranges that do not need the job's shape (the sets' sizes are checked
// when an MPI client opens: parity::MakeSets).
Status ValidateMpi(const Config& c) {
  if (c.l3_code == L3Code::kXor && c.l3_parity > 1) {
    return Status::Config("mpi.l3_parity (CAIRN_L3_PARITY) is " + std::to_string(c.l3_parity) +
                          " with mpi.l3_code = xor, which rebuilds one lost member per set; "
                          "mpi.l3_code = rs rebuilds more");
  }
  return Status::Ok();
}

}  // namespace

Status Config::Validate() const {
  CAIRN_RETURN_IF_ERROR(ValidateStorage(*this));
  CAIRN_RETURN_IF_ERROR(ValidateHostCache(*this));
  CAIRN_RETURN_IF_ERROR(ValidateDevice(*this));
  CAIRN_RETURN_IF_ERROR(ValidateMpi(*this));
  return ValidateCheckpoint(*this);
}

Result<Config> LoadConfigFromString(std::string_view toml, std::string_view origin, bool apply_environment) {
  try {
    std::string text(toml);
    return Build(&text, origin, apply_environment);
  } catch (const std::bad_alloc&) {
    return Status::NoMemory("out of memory while loading the configuration");
  } catch (const std::exception& e) {
    return Status::Config(std::string("loading the configuration failed: ") + e.what());
  }
}

Result<Config> LoadConfig(const char* path) {
  try {
    std::string file;
    const char* how = "";
    if (path != nullptr && *path != '\0') {
      file = path;
    } else if (const char* env = std::getenv("CAIRN_CONFIG"); env != nullptr && *env != '\0') {
      file = env;
      how = " (from CAIRN_CONFIG)";
    }
    if (file.empty()) return Build(nullptr, "", true);
    auto text = ReadFile(file, how);
    if (!text.ok()) return text.status();
    return Build(&text.value(), file, true);
  } catch (const std::bad_alloc&) {
    return Status::NoMemory("out of memory while loading the configuration");
  } catch (const std::exception& e) {
    return Status::Config(std::string("loading the configuration failed: ") + e.what());
  }
}

}  // namespace cairn
