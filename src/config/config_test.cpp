#include "cairn/config.hpp"

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "config/toml_check.hpp"

namespace cairn {
namespace {

constexpr const char* kVars[] = {"CAIRN_SCRATCH", "CAIRN_PERSISTENT",   "CAIRN_HOST_CACHE",
                                 "CAIRN_BLOCK_SIZE", "CAIRN_KEEP",       "CAIRN_DIRECT_IO",
                                 "CAIRN_FSYNC",   "CAIRN_FILE_MODE",     "CAIRN_PREFETCH_DEPTH",
                                 "CAIRN_CONFIG",  "CAIRN_TRACE",         "CAIRN_COPY_THREADS",
                                 "CAIRN_HOST_CACHE_INIT", "CAIRN_HUGE_PAGES", "CAIRN_PIN",
                                 "CAIRN_DEVICE_CACHE", "CAIRN_DEVICE_CACHE_INIT", "CAIRN_DEVICE",
                                 "CAIRN_CHANGES", "CAIRN_MAX_LAYERS", "CAIRN_HASH_CHUNK",
                                 "CAIRN_CAPTURE", "CAIRN_COW", "CAIRN_MTBF",
                                 "TMPDIR"};

// Clears every variable the loader reads and restores them afterwards, so
// the tests neither see the caller's environment nor leak into other tests.
class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kVars) {
      const char* old = std::getenv(v);
      saved_.emplace_back(v, old ? std::optional<std::string>(old) : std::nullopt);
      ::unsetenv(v);
    }
  }
  void TearDown() override {
    for (auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
    for (const std::string& f : files_) std::remove(f.c_str());
  }
  std::string WriteFile(const std::string& text) {
    std::string path = ::testing::TempDir() + "cairn_config_XXXXXX";
    int fd = ::mkstemp(path.data());
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    ::close(fd);
    files_.push_back(path);
    return path;
  }
  static Result<Config> Parse(const std::string& toml, bool env = false) {
    return LoadConfigFromString(toml, "cairn.toml", env);
  }
  static std::string ErrorOf(const std::string& toml) {
    auto r = Parse(toml);
    EXPECT_FALSE(r.ok()) << toml;
    if (r.ok()) return "";
    EXPECT_EQ(r.status().code(), Code::kConfig) << r.status().ToString();
    return r.status().message();
  }

  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
  std::vector<std::string> files_;
};

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "'" << (haystack) << "'"

constexpr const char* kFullFile = R"(
[storage]
scratch = "/fast/scratch"
persistent = "/lustre/ckpt"
file_mode = "0640"
direct_io = false
fsync = false

[host_cache]
size = "2GiB"
block_size = "1MiB"

[retention]
keep_versions = 5

[history]
prefetch_depth = 3
persistent = true
)";

TEST_F(ConfigTest, DefaultsWithoutFileOrEnvironment) {
  auto r = LoadConfig(nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Config& c = r.value();
  EXPECT_EQ(c.scratch_dir.rfind("/tmp/cairn-", 0), 0u) << c.scratch_dir;
  EXPECT_EQ(c.scratch_dir.substr(c.scratch_dir.size() - 8), "/scratch");
  EXPECT_EQ(c.persistent_dir, "");
  EXPECT_EQ(c.file_mode, 0600u);
  EXPECT_TRUE(c.direct_io);
  EXPECT_TRUE(c.fsync);
  EXPECT_EQ(c.host_cache_bytes, 512ull << 20);
  EXPECT_EQ(c.block_bytes, 4ull << 20);
  EXPECT_EQ(c.keep_versions, 2);
  EXPECT_EQ(c.prefetch_depth, 0);
  EXPECT_FALSE(c.history_persistent);
  EXPECT_EQ(c.fs, nullptr);
  EXPECT_TRUE(LoadConfig("").ok());
  EXPECT_TRUE(DefaultConfig().Validate().ok());
}

TEST_F(ConfigTest, DefaultScratchUsesTmpdirAndASafeUserName) {
  ::setenv("TMPDIR", "/var/tmp/job42/", 1);
  std::string s = DefaultConfig().scratch_dir;
  EXPECT_EQ(s.rfind("/var/tmp/job42/cairn-", 0), 0u) << s;
  std::string user = s.substr(std::string("/var/tmp/job42/cairn-").size());
  user = user.substr(0, user.find('/'));
  EXPECT_FALSE(user.empty());
  EXPECT_EQ(user.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"),
            std::string::npos)
      << user;
  EXPECT_EQ(s.substr(s.size() - 8), "/scratch");
}

TEST_F(ConfigTest, EveryKey) {
  auto r = Parse(kFullFile);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Config& c = r.value();
  EXPECT_EQ(c.scratch_dir, "/fast/scratch");
  EXPECT_EQ(c.persistent_dir, "/lustre/ckpt");
  EXPECT_EQ(c.file_mode, 0640u);
  EXPECT_FALSE(c.direct_io);
  EXPECT_FALSE(c.fsync);
  EXPECT_EQ(c.host_cache_bytes, 2ull << 30);
  EXPECT_EQ(c.block_bytes, 1ull << 20);
  EXPECT_EQ(c.keep_versions, 5);
  EXPECT_EQ(c.prefetch_depth, 3);
  EXPECT_TRUE(c.history_persistent);
}

TEST(L3ParityTest, ZeroMeansTheCodesDefaultAndAnythingElseIsKept) {
  EXPECT_EQ(EffectiveL3Parity(L3Code::kXor, 0), 1);
  EXPECT_EQ(EffectiveL3Parity(L3Code::kRs, 0), 2);
  EXPECT_EQ(EffectiveL3Parity(L3Code::kRs, 3), 3);
  EXPECT_EQ(EffectiveL3Parity(L3Code::kXor, 1), 1);
}

TEST_F(ConfigTest, IntegersForSizesAndOctalModes) {
  auto r = Parse("[host_cache]\nsize = 16777216\nblock_size = 65536\n[storage]\nfile_mode = 0o660\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->host_cache_bytes, 16777216u);
  EXPECT_EQ(r->block_bytes, 65536u);
  EXPECT_EQ(r->file_mode, 0660u);
  EXPECT_EQ(Parse("[storage]\nfile_mode = \"0o600\"\n")->file_mode, 0600u);
  EXPECT_EQ(Parse("[storage]\nfile_mode = \"600\"\n")->file_mode, 0600u);
  // Decimal 600 would be 01130: rejected with a hint.
  std::string e = ErrorOf("[storage]\nfile_mode = 600\n");
  EXPECT_CONTAINS(e, "storage.file_mode");
  EXPECT_CONTAINS(e, "octal");
  EXPECT_CONTAINS(ErrorOf("[storage]\nfile_mode = \"0680\"\n"), "bad file mode '0680'");
}

TEST_F(ConfigTest, EmptyTablesAndFileAreFine) {
  EXPECT_TRUE(Parse("").ok());
  EXPECT_TRUE(Parse("[storage]\n[host_cache]\n[retention]\n[history]\n").ok());
  auto r = Parse("host_cache.size = \"1GiB\"\n");  // dotted keys work too
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->host_cache_bytes, 1ull << 30);
}

TEST_F(ConfigTest, UnknownKeysAreNamedWithTheirLine) {
  std::string e = ErrorOf("[storage]\nscratch = \"/x\"\n[host_cache]\nsise = \"1GiB\"\n");
  EXPECT_CONTAINS(e, "unknown key 'host_cache.sise' in cairn.toml (line 4)");
  EXPECT_CONTAINS(e, "did you mean 'host_cache.size'");
  e = ErrorOf("\n[storrage]\nscratch = \"/x\"\n");
  EXPECT_CONTAINS(e, "unknown key 'storrage' in cairn.toml (line 2)");
  e = ErrorOf("scratch = \"/x\"\n");
  EXPECT_CONTAINS(e, "unknown key 'scratch' in cairn.toml (line 1)");
  EXPECT_CONTAINS(e, "did you mean 'storage.scratch'");
  EXPECT_CONTAINS(ErrorOf("[retention]\nkeep = 3\n"), "unknown key 'retention.keep'");
}

TEST_F(ConfigTest, WrongTypesNameKeyAndExpectedType) {
  std::string e = ErrorOf("[storage]\ndirect_io = \"yes\"\n");
  EXPECT_CONTAINS(e, "key 'storage.direct_io' in cairn.toml (line 2) must be a boolean");
  EXPECT_CONTAINS(e, "not a string");
  EXPECT_CONTAINS(ErrorOf("[storage]\nscratch = 5\n"), "key 'storage.scratch' in cairn.toml (line 2) must be a string");
  EXPECT_CONTAINS(ErrorOf("[retention]\nkeep_versions = 1.5\n"), "'retention.keep_versions' in cairn.toml (line 2) must be an integer, not a floating-point");
  EXPECT_CONTAINS(ErrorOf("[retention]\nkeep_versions = 0\n"), "'retention.keep_versions' in cairn.toml (line 2) must be an integer >= 1");
  EXPECT_CONTAINS(ErrorOf("[history]\nprefetch_depth = -1\n"), "'history.prefetch_depth' in cairn.toml (line 2) must be an integer >= 0");
  EXPECT_CONTAINS(ErrorOf("[history]\npersistent = 1\n"), "'history.persistent' in cairn.toml (line 2) must be a boolean");
  EXPECT_CONTAINS(ErrorOf("[host_cache]\nsize = true\n"), "'host_cache.size' in cairn.toml (line 2) must be a size");
  EXPECT_CONTAINS(ErrorOf("[host_cache]\nsize = -5\n"), "must not be negative");
  EXPECT_CONTAINS(ErrorOf("storage = 3\n"), "key 'storage' in cairn.toml (line 1) must be a table, not an integer");
}

TEST_F(ConfigTest, BadSizeStringsInTheFile) {
  std::string e = ErrorOf("[host_cache]\n\nsize = \"12XB\"\n");
  EXPECT_CONTAINS(e, "key 'host_cache.size' in cairn.toml (line 3): bad size '12XB': unknown unit 'XB'");
  EXPECT_CONTAINS(ErrorOf("[host_cache]\nblock_size = \"lots\"\n"), "bad size 'lots'");
}

TEST_F(ConfigTest, SyntaxErrorsGiveLineAndColumn) {
  std::string e = ErrorOf("[storage]\nscratch = \"/x\"\nfsync = tru\n");
  EXPECT_CONTAINS(e, "TOML syntax error in cairn.toml (line 3, column");
}

// fuzz_config's first finding (tests/data/fuzz/config): a table header that
// starts with a character no key may start with. toml++ 3.3 asserts on it
// before reporting it, which aborted builds without NDEBUG (and is undefined
// behaviour with NDEBUG under clang); config.cpp turns toml++'s assertions off.
TEST_F(ConfigTest, TableHeaderWithABadFirstCharacterIsASyntaxError) {
  for (const char* text : {"[;\nscrn\x02\n", "[ ;]\n", "[[;]]\n", "[storage.;]\n"}) {
    std::string e = ErrorOf(text);
    EXPECT_CONTAINS(e, "TOML syntax error in cairn.toml (line 1");
  }
}

// fuzz_config's second finding (tests/data/fuzz/config): toml++ 3.3 reaches
// __builtin_unreachable (undefined behaviour, in every build) when it checks
// a non-ASCII character for whitespace (toml++ issues #190, #295).
// CheckTomlText (config/toml_check.hpp) rejects those before toml++ sees them.
TEST_F(ConfigTest, NonAsciiWhereTomlppChecksForWhitespaceIsASyntaxError) {
  EXPECT_CONTAINS(ErrorOf("\xcc\xaa"),
                  "TOML syntax error in cairn.toml (line 1, column 1): non-ASCII character outside");
  EXPECT_CONTAINS(ErrorOf("[storage]\nscratch = \"/x\" \xc2\xa7\n"), "(line 2, column 16)");
  EXPECT_CONTAINS(ErrorOf("[st\xc3\xb6rage]\n"), "(line 1, column 4)");
  EXPECT_CONTAINS(ErrorOf("[storage]\nscratch = \"\"\"\\\n\xc2\xa7\"\"\"\n"),
                  "(line 3, column 1): non-ASCII character first after a line-ending backslash");
  EXPECT_CONTAINS(ErrorOf("[storage]\nscratch = \"\"\"\\  \n  \n \xc2\xa7\"\"\"\n"), "(line 4, column 2)");
  EXPECT_CONTAINS(ErrorOf("[storage]\nscratch = \"\"\"a\\\xc2\xa7\"\"\"\n"),
                  "non-ASCII character after a backslash");
  // A quote inside a bare value does not open a string for toml++ (third finding).
  EXPECT_CONTAINS(ErrorOf("[storage]\nscratch = +/x\"\xef\xbb\x9f\"\n"), "(line 2, column 15)");
  // Nor after an `=` inside a bare value (fourth finding, 21 bytes).
  EXPECT_CONTAINS(ErrorOf("8h =8\"stor``@@@J@='\xd1\x96"), "(line 1, column 20)");
  // Nor after a value, on the same line.
  EXPECT_CONTAINS(ErrorOf("a = 1 '\xc3\xa9'\n"), "(line 1, column 8)");
  // Non-ASCII text stays fine where TOML allows it: strings and comments.
  for (const char* ok : {
           "# Gr\xc3\xb6\xc3\x9f" "e\n[storage]\nscratch = \"/scratch/j\xc3\xbcrgen\"  # \xc2\xa7\n",
           "[storage]\nscratch = '/tmp/\xc3\xa9'\n",
           "[storage]\nscratch = '''/tmp/\xc3\xa9\n'''\n",
           "[storage]\nscratch = \"\"\"/tmp/\\\n  x\xc3\xa9\"\"\"\n",
           "[storage]\nscratch = \"\"\"/tmp/\\\"\xc3\xa9\"\"\"\"\n",
           "[storage]\nscratch = \"/tmp/\\\"\xc3\xa9\"\n",
           "[\"storage\"]\nscratch = \"/x\"\n"}) {
    auto r = Parse(ok);
    EXPECT_TRUE(r.ok()) << ok << ": " << r.status().ToString();
  }
  // Strings where TOML's grammar puts values and keys (the pass alone: these
  // keys are not Cairn's): arrays over lines, inline tables, dotted and
  // quoted keys, arrays of tables.
  for (const char* ok : {
           "note = [ \"\xc3\xa9\", # \xc2\xa7\n  '\xc3\xa9', [\"\xc3\xa9\"], [] ]\nb = 2\n",
           "t = { a = \"\xc3\xa9\", \"b\xc3\xa9\" = '\xc3\xa9', c = {} }\n",
           "[x]\na.\"\xc3\xa9\".c = 1\n[[x.list]]\nv = \"\xc3\xa9\"\n[ \"\xc3\xa9\" . y ]\n"}) {
    EXPECT_TRUE(CheckTomlText(ok, "t.toml").ok()) << ok << ": " << CheckTomlText(ok, "t.toml").ToString();
  }
}

TEST_F(ConfigTest, EnvironmentBeatsTheFile) {
  ::setenv("CAIRN_SCRATCH", "/env/scratch", 1);
  ::setenv("CAIRN_PERSISTENT", "/env/persistent", 1);
  ::setenv("CAIRN_HOST_CACHE", "256 MiB", 1);
  ::setenv("CAIRN_BLOCK_SIZE", "128k", 1);
  ::setenv("CAIRN_KEEP", "7", 1);
  ::setenv("CAIRN_DIRECT_IO", "TRUE", 1);
  ::setenv("CAIRN_FSYNC", "1", 1);
  ::setenv("CAIRN_FILE_MODE", "0660", 1);
  ::setenv("CAIRN_PREFETCH_DEPTH", "9", 1);
  auto r = Parse(kFullFile, /*env=*/true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Config& c = r.value();
  EXPECT_EQ(c.scratch_dir, "/env/scratch");
  EXPECT_EQ(c.persistent_dir, "/env/persistent");
  EXPECT_EQ(c.host_cache_bytes, 256ull << 20);
  EXPECT_EQ(c.block_bytes, 128ull << 10);
  EXPECT_EQ(c.keep_versions, 7);
  EXPECT_TRUE(c.direct_io);
  EXPECT_TRUE(c.fsync);
  EXPECT_EQ(c.file_mode, 0660u);
  EXPECT_EQ(c.prefetch_depth, 9);
  EXPECT_TRUE(c.history_persistent);  // no variable: the file's value stays

  // Without apply_environment the file wins.
  auto f = Parse(kFullFile, /*env=*/false);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->scratch_dir, "/fast/scratch");
  EXPECT_EQ(f->keep_versions, 5);

  // An empty CAIRN_PERSISTENT turns the persistent tier off.
  ::setenv("CAIRN_PERSISTENT", "", 1);
  ::setenv("CAIRN_DIRECT_IO", "off", 1);
  auto g = Parse(kFullFile, true);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->persistent_dir, "");
  EXPECT_FALSE(g->direct_io);
}

TEST_F(ConfigTest, BadEnvironmentValuesNameTheVariable) {
  const std::pair<const char*, const char*> cases[] = {
      {"CAIRN_SCRATCH", ""},          {"CAIRN_HOST_CACHE", "big"},   {"CAIRN_BLOCK_SIZE", "-4MiB"},
      {"CAIRN_KEEP", "0"},            {"CAIRN_KEEP", "two"},         {"CAIRN_DIRECT_IO", "maybe"},
      {"CAIRN_FSYNC", "2"},           {"CAIRN_FILE_MODE", "rw-"},    {"CAIRN_PREFETCH_DEPTH", "-1"},
      {"CAIRN_PREFETCH_DEPTH", "1x"}, {"CAIRN_HOST_CACHE_INIT", "fast"}, {"CAIRN_PIN", "sometimes"},
      {"CAIRN_DEVICE_CACHE", "1 bucket"}, {"CAIRN_DEVICE_CACHE", "-1GiB"},
      {"CAIRN_DEVICE_CACHE_INIT", "lazy"}, {"CAIRN_DEVICE", "gpu0"}, {"CAIRN_DEVICE", "-2"},
  };
  for (const auto& [name, value] : cases) {
    ::setenv(name, value, 1);
    auto r = LoadConfig(nullptr);
    ::unsetenv(name);
    ASSERT_FALSE(r.ok()) << name << "=" << value;
    EXPECT_EQ(r.status().code(), Code::kConfig);
    EXPECT_CONTAINS(r.status().message(), name);
  }
}

TEST_F(ConfigTest, ConfigFileFromPathOrCairnConfig) {
  std::string a = WriteFile("[retention]\nkeep_versions = 3\n");
  std::string b = WriteFile("[retention]\nkeep_versions = 4\n");
  auto r = LoadConfig(a.c_str());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->keep_versions, 3);
  ::setenv("CAIRN_CONFIG", b.c_str(), 1);
  EXPECT_EQ(LoadConfig(nullptr)->keep_versions, 4);
  EXPECT_EQ(LoadConfig("")->keep_versions, 4);
  EXPECT_EQ(LoadConfig(a.c_str())->keep_versions, 3);  // an explicit path wins
  ::setenv("CAIRN_KEEP", "6", 1);
  EXPECT_EQ(LoadConfig(a.c_str())->keep_versions, 6);  // the environment wins over both

  std::string bad = WriteFile("[retention]\nkeep_versions = 3\nkeepversions = 1\n");
  auto e = LoadConfig(bad.c_str());
  ASSERT_FALSE(e.ok());
  EXPECT_CONTAINS(e.status().message(), "unknown key 'retention.keepversions' in " + bad + " (line 3)");

  auto missing = LoadConfig("/nonexistent/cairn.toml");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kConfig);
  EXPECT_CONTAINS(missing.status().message(), "cannot read config file '/nonexistent/cairn.toml'");
  ::setenv("CAIRN_CONFIG", "/nonexistent/c.toml", 1);
  EXPECT_CONTAINS(LoadConfig(nullptr).status().message(), "CAIRN_CONFIG");
}

TEST_F(ConfigTest, RelativeDirectoriesBecomeAbsolute) {
  auto r = Parse("[storage]\nscratch = \"rel/dir\"\npersistent = \"./p\"\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof(cwd)), nullptr);
  std::string base = std::string(cwd) == "/" ? "" : std::string(cwd);
  EXPECT_EQ(r->scratch_dir, base + "/rel/dir");
  EXPECT_EQ(r->persistent_dir, base + "/p");
}

TEST_F(ConfigTest, TraceAndCopyThreads) {
  auto r = Parse("[trace]\npath = \"/t/timeline.json\"\n[host_cache]\ncopy_threads = 0\n", true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->trace_path, "/t/timeline.json");
  EXPECT_EQ(r->copy_threads, 0);
  ::setenv("CAIRN_TRACE", "/env/trace.json", 1);
  ::setenv("CAIRN_COPY_THREADS", "2", 1);
  auto e = Parse("[trace]\npath = \"/t/timeline.json\"\n", true);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->trace_path, "/env/trace.json");
  EXPECT_EQ(e->copy_threads, 2);
  EXPECT_EQ(DefaultConfig().copy_threads, -1);  // automatic
  EXPECT_EQ(DefaultConfig().trace_path, "");    // off
  ::setenv("CAIRN_COPY_THREADS", "-2", 1);
  auto bad = Parse("", true);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("CAIRN_COPY_THREADS"), std::string::npos)
      << bad.status().message();
}

TEST_F(ConfigTest, CacheInitKeys) {
  const Config d = DefaultConfig();
  EXPECT_EQ(d.init, CacheInit::kAdaptive);
  EXPECT_TRUE(d.huge_pages);
  EXPECT_FALSE(d.pin);
  EXPECT_TRUE(d.pin_serialize);
  EXPECT_TRUE(d.host_cache_grow);
  auto r = Parse(
      "[host_cache]\ngrow = false\ninit = \"sequential\"\nhuge_pages = false\npin = true\n"
      "pin_serialize = false\npin_lock = \"/dev/shm/x.lock\"\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->host_cache_grow);
  EXPECT_EQ(r->init, CacheInit::kSequential);
  EXPECT_FALSE(r->huge_pages);
  EXPECT_TRUE(r->pin);
  EXPECT_FALSE(r->pin_serialize);
  EXPECT_EQ(r->pin_lock_path, "/dev/shm/x.lock");
  for (const char* name : {"eager", "memset", "lazy", "concurrent", "sequential", "adaptive"}) {
    auto p = ParseCacheInit(name);
    ASSERT_TRUE(p.ok()) << name;
    EXPECT_STREQ(CacheInitName(*p), name);
  }
  const std::string bad = ErrorOf("[host_cache]\ninit = \"quick\"\n");
  EXPECT_CONTAINS(bad, "host_cache.init");
  EXPECT_CONTAINS(bad, "'quick' is not a cache init strategy");
  EXPECT_CONTAINS(ErrorOf("[host_cache]\ninit = 3\n"), "must be a string");
  ::setenv("CAIRN_HOST_CACHE_INIT", "eager", 1);
  ::setenv("CAIRN_PIN", "on", 1);
  auto e = Parse("[host_cache]\ninit = \"lazy\"\n", true);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->init, CacheInit::kEager);
  EXPECT_TRUE(e->pin);
}

TEST_F(ConfigTest, DeviceCacheKeys) {
  const Config d = DefaultConfig();
  EXPECT_EQ(d.device_cache_bytes, 0u);  // no device cache
  EXPECT_EQ(d.device_cache_init, DeviceCacheInit::kIncremental);
  EXPECT_EQ(d.device_map_chunk_bytes, 1ull << 30);
  EXPECT_EQ(d.device, -1);
  EXPECT_EQ(d.bounce_buffers, 2);
  auto r = Parse(
      "[device_cache]\nsize = \"8GiB\"\ninit = \"direct\"\nmap_chunk = \"256MiB\"\n"
      "device = 1\nbounce_buffers = 4\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->device_cache_bytes, 8ull << 30);
  EXPECT_EQ(r->device_cache_init, DeviceCacheInit::kDirect);
  EXPECT_EQ(r->device_map_chunk_bytes, 256ull << 20);
  EXPECT_EQ(r->device, 1);
  EXPECT_EQ(r->bounce_buffers, 4);
  // Integers are sizes too; 0 = no device cache; -1 = the current context's device.
  r = Parse("[device_cache]\nsize = 0\nmap_chunk = 2097152\ndevice = -1\nbounce_buffers = 64\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->device_cache_bytes, 0u);
  EXPECT_EQ(r->device_map_chunk_bytes, 2ull << 20);
  EXPECT_EQ(r->bounce_buffers, 64);
  for (const char* name : {"direct", "incremental"}) {
    auto p = ParseDeviceCacheInit(name);
    ASSERT_TRUE(p.ok()) << name;
    EXPECT_STREQ(DeviceCacheInitName(*p), name);
  }

  // Each bad value names its key and line.
  const std::pair<const char*, const char*> bad[] = {
      {"[device_cache]\nsize = \"lots\"\n", "key 'device_cache.size' in cairn.toml (line 2): bad size 'lots'"},
      {"[device_cache]\nsize = -1\n", "key 'device_cache.size' in cairn.toml (line 2) must not be negative"},
      {"[device_cache]\nsize = true\n", "key 'device_cache.size' in cairn.toml (line 2) must be a size"},
      {"[device_cache]\ninit = \"lazy\"\n",
       "key 'device_cache.init' in cairn.toml (line 2): 'lazy' is not a device cache init (direct, incremental)"},
      {"[device_cache]\ninit = 1\n", "key 'device_cache.init' in cairn.toml (line 2) must be a string"},
      {"[device_cache]\nmap_chunk = \"1.1KiB\"\n", "key 'device_cache.map_chunk' in cairn.toml (line 2): bad size"},
      {"[device_cache]\nmap_chunk = 0\n", "device_cache.map_chunk is 0 bytes"},
      {"[device_cache]\ndevice = -2\n", "key 'device_cache.device' in cairn.toml (line 2) must be an integer >= -1"},
      {"[device_cache]\ndevice = \"0\"\n", "key 'device_cache.device' in cairn.toml (line 2) must be an integer"},
      {"[device_cache]\nbounce_buffers = 0\n",
       "key 'device_cache.bounce_buffers' in cairn.toml (line 2) must be an integer >= 1"},
      {"[device_cache]\nbounce_buffers = 65\n", "device_cache.bounce_buffers is 65; it must be between 1 and 64"},
      {"[device_cache]\nsize = \"1MiB\"\n", "device_cache.size (CAIRN_DEVICE_CACHE) is 1048576 bytes"},
  };
  for (const auto& [toml, message] : bad) EXPECT_CONTAINS(ErrorOf(toml), message);
  std::string e = ErrorOf("[device_cache]\n\nmap_chunks = \"1GiB\"\n");
  EXPECT_CONTAINS(e, "unknown key 'device_cache.map_chunks' in cairn.toml (line 3)");
  EXPECT_CONTAINS(e, "did you mean 'device_cache.map_chunk'");
  e = ErrorOf("[device_cach]\nsize = 0\n");
  EXPECT_CONTAINS(e, "unknown key 'device_cach' in cairn.toml (line 1)");
  EXPECT_CONTAINS(ErrorOf("[host_cache]\ndevice = 0\n"), "unknown key 'host_cache.device'");

  // The environment wins over the file.
  ::setenv("CAIRN_DEVICE_CACHE", "2GiB", 1);
  ::setenv("CAIRN_DEVICE_CACHE_INIT", "direct", 1);
  ::setenv("CAIRN_DEVICE", "3", 1);
  auto env = Parse("[device_cache]\nsize = \"8GiB\"\ninit = \"incremental\"\ndevice = 1\n", true);
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->device_cache_bytes, 2ull << 30);
  EXPECT_EQ(env->device_cache_init, DeviceCacheInit::kDirect);
  EXPECT_EQ(env->device, 3);
  ::setenv("CAIRN_DEVICE_CACHE", "0", 1);
  ::setenv("CAIRN_DEVICE", "-1", 1);
  env = Parse("[device_cache]\nsize = \"8GiB\"\n", true);
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->device_cache_bytes, 0u);
  EXPECT_EQ(env->device, -1);
  ::setenv("CAIRN_DEVICE_CACHE", "64KiB", 1);  // less than one 4 MiB block
  env = Parse("", true);
  ASSERT_FALSE(env.ok());
  EXPECT_CONTAINS(env.status().message(), "device_cache.size (CAIRN_DEVICE_CACHE)");
}

TEST_F(ConfigTest, ValidateNamesTheKey) {
  struct Case {
    void (*mutate)(Config*);
    const char* key;
  };
  const Case cases[] = {
      {[](Config* c) { c->scratch_dir.clear(); }, "storage.scratch"},
      {[](Config* c) { c->block_bytes = 65536 + 512; }, "host_cache.block_size"},
      {[](Config* c) { c->block_bytes = 32 << 10; }, "host_cache.block_size"},
      {[](Config* c) { c->block_bytes = 2ull << 30; c->host_cache_bytes = 8ull << 30; }, "host_cache.block_size"},
      {[](Config* c) { c->host_cache_bytes = 2 * c->block_bytes - 1; }, "host_cache.size"},
      {[](Config* c) { c->keep_versions = 0; }, "retention.keep_versions"},
      {[](Config* c) { c->prefetch_depth = -1; }, "history.prefetch_depth"},
      {[](Config* c) { c->file_mode = 01700; }, "storage.file_mode"},
      {[](Config* c) { c->file_mode = 0400; }, "storage.file_mode"},
      {[](Config* c) { c->persistent_dir = c->scratch_dir + "/"; }, "storage.persistent"},
      {[](Config* c) { c->persistent_dir = c->scratch_dir + "/./"; }, "storage.persistent"},
      {[](Config* c) { c->device_cache_bytes = c->block_bytes - 1; }, "device_cache.size"},
      {[](Config* c) { c->device_map_chunk_bytes = 0; }, "device_cache.map_chunk"},
      {[](Config* c) { c->device = -2; }, "device_cache.device"},
      {[](Config* c) { c->bounce_buffers = 0; }, "device_cache.bounce_buffers"},
      {[](Config* c) { c->bounce_buffers = 65; }, "device_cache.bounce_buffers"},
  };
  for (const Case& k : cases) {
    Config c = DefaultConfig();
    ASSERT_TRUE(c.Validate().ok());
    k.mutate(&c);
    Status s = c.Validate();
    EXPECT_EQ(s.code(), Code::kConfig) << k.key;
    EXPECT_CONTAINS(s.message(), k.key);
  }
  Config c = DefaultConfig();
  c.host_cache_bytes = 2 * c.block_bytes;  // exactly two blocks is enough
  EXPECT_TRUE(c.Validate().ok());
  c.host_cache_bytes -= 4096;
  EXPECT_CONTAINS(c.Validate().message(), "at least 2 blocks");
  // Through the file, the same checks apply.
  EXPECT_CONTAINS(ErrorOf("[host_cache]\nblock_size = \"100000\"\n"), "multiple of 4096");
}

TEST(ParseSizeTest, Accepts) {
  const std::pair<const char*, uint64_t> cases[] = {
      {"0", 0},
      {"4096", 4096},
      {"4096B", 4096},
      {"512MiB", 512ull << 20},
      {"4 GiB", 4ull << 30},
      {" 4gib ", 4ull << 30},
      {"100MB", 100000000},
      {"1KB", 1000},
      {"1kb", 1000},
      {"1KiB", 1024},
      {"1k", 1024},
      {"2M", 2ull << 20},
      {"3G", 3ull << 30},
      {"1T", 1ull << 40},
      {"1TB", 1000000000000ull},
      {"2TiB", 2ull << 40},
      {"1.5GiB", 1610612736},
      {"0.5KiB", 512},
      {"1.50MiB", 1572864},
      {"2.0", 2},
      {"18446744073709551615", UINT64_MAX},
      {"16777215TiB", 16777215ull << 40},
  };
  for (const auto& [text, bytes] : cases) {
    auto r = ParseSize(text);
    ASSERT_TRUE(r.ok()) << text << ": " << r.status().ToString();
    EXPECT_EQ(r.value(), bytes) << text;
  }
}

TEST(ParseSizeTest, Rejects) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "empty"},
      {"   ", "empty"},
      {"-1", "negative"},
      {"-1MiB", "negative"},
      {"MiB", "expected a number"},
      {"12XB", "unknown unit 'XB'"},
      {"1.5", "whole number"},
      {"0.1KiB", "whole number"},
      {"1.", "digits after"},
      {"1e9", "unknown unit"},
      {"4 Mi B", "unknown unit"},
      {"18446744073709551616", "too large"},
      {"16777216TiB", "too large"},
      {"99999999999999999999999GiB", "too large"},
      {"+5", "expected a number"},
      {"0x10", "unknown unit"},
  };
  for (const auto& [text, why] : cases) {
    auto r = ParseSize(text);
    ASSERT_FALSE(r.ok()) << "'" << text << "' parsed as " << r.value();
    EXPECT_EQ(r.status().code(), Code::kConfig);
    EXPECT_CONTAINS(r.status().message(), why);
    EXPECT_CONTAINS(r.status().message(), std::string("bad size '") + text + "'");
  }
}

TEST(FormatSizeTest, BinaryUnitsThreeSignificantDigits) {
  EXPECT_EQ(FormatSize(0), "0 B");
  EXPECT_EQ(FormatSize(1000), "1000 B");
  EXPECT_EQ(FormatSize(1024), "1 KiB");
  EXPECT_EQ(FormatSize(1536), "1.5 KiB");
  EXPECT_EQ(FormatSize(536870912), "512 MiB");
  EXPECT_EQ(FormatSize(4ull << 20), "4 MiB");
  EXPECT_EQ(FormatSize(1610612736), "1.5 GiB");
  EXPECT_EQ(FormatSize(123456789), "118 MiB");
  EXPECT_EQ(FormatSize(10ull << 40), "10 TiB");
  EXPECT_EQ(FormatSize((1ull << 20) - 1), "1 MiB");  // 1023.999 KiB rounds up a unit
  EXPECT_EQ(FormatSize(UINT64_MAX), "16 EiB");
  // Round trip for exact values.
  for (uint64_t v : {4096ull, 65536ull, 512ull << 20, 3ull << 30}) {
    EXPECT_EQ(ParseSize(FormatSize(v)).value(), v);
  }
}

TEST_F(ConfigTest, ChangeDetectionKeys) {
  const Config d = DefaultConfig();
  EXPECT_EQ(d.changes, ChangeDetection::kFull);
  EXPECT_EQ(d.max_layers, 10);
  EXPECT_EQ(d.hash_chunk_bytes, 64u << 10);
  auto r = Parse("[checkpoint]\nchanges = \"hash\"\nmax_layers = 0\nhash_chunk = \"1MiB\"\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->changes, ChangeDetection::kHash);
  EXPECT_EQ(r->max_layers, 0);
  EXPECT_EQ(r->hash_chunk_bytes, 1u << 20);
  for (const char* name : {"full", "pages", "hash", "auto"}) {
    auto p = ParseChangeDetection(name);
    ASSERT_TRUE(p.ok()) << name;
    EXPECT_STREQ(ChangeDetectionName(*p), name);
  }
  const std::pair<const char*, const char*> bad[] = {
      {"[checkpoint]\nchanges = \"dirty\"\n",
       "key 'checkpoint.changes' in cairn.toml (line 2): 'dirty' is not a change detection mode (full, pages, hash, "
       "auto)"},
      {"[checkpoint]\nchanges = 2\n", "key 'checkpoint.changes' in cairn.toml (line 2) must be a string"},
      {"[checkpoint]\nmax_layers = -1\n", "key 'checkpoint.max_layers' in cairn.toml (line 2) must be an integer >= 0"},
      {"[checkpoint]\nhash_chunk = \"6KiB\"\n", "checkpoint.hash_chunk (CAIRN_HASH_CHUNK) is 6144 bytes"},
      {"[checkpoint]\nhash_chunk = 0\n", "a multiple of 4 KiB between 4 KiB and 64 MiB"},
      {"[checkpoint]\nhash_chunk = \"128MiB\"\n", "a multiple of 4 KiB between 4 KiB and 64 MiB"},
  };
  for (const auto& [toml, message] : bad) EXPECT_CONTAINS(ErrorOf(toml), message);
  EXPECT_CONTAINS(ErrorOf("[checkpoint]\nmax_layer = 3\n"), "did you mean 'checkpoint.max_layers'");

  // The environment wins over the file; bad values name the variable.
  ::setenv("CAIRN_CHANGES", "auto", 1);
  ::setenv("CAIRN_MAX_LAYERS", "5", 1);
  ::setenv("CAIRN_HASH_CHUNK", "16KiB", 1);
  auto env = Parse("[checkpoint]\nchanges = \"hash\"\nmax_layers = 15\n", true);
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->changes, ChangeDetection::kAuto);
  EXPECT_EQ(env->max_layers, 5);
  EXPECT_EQ(env->hash_chunk_bytes, 16u << 10);
  for (const auto& [name, value] : {std::pair{"CAIRN_CHANGES", "pagez"}, std::pair{"CAIRN_MAX_LAYERS", "-1"},
                                    std::pair{"CAIRN_HASH_CHUNK", "1000"}}) {
    ::setenv(name, value, 1);
    auto e = Parse("", true);
    ::unsetenv(name);
    ASSERT_FALSE(e.ok()) << name << "=" << value;
    EXPECT_CONTAINS(e.status().message(), name);
  }
}

TEST_F(ConfigTest, ZeroCopyKeys) {
  const Config d = DefaultConfig();
  EXPECT_EQ(d.capture, CaptureMode::kCopy);
  EXPECT_DOUBLE_EQ(d.cow_fraction, 0.05);
  auto r = Parse("[checkpoint]\ncapture = \"zero-copy\"\ncow_fraction = 0.1\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->capture, CaptureMode::kZeroCopy);
  EXPECT_DOUBLE_EQ(r->cow_fraction, 0.1);
  auto i = Parse("[checkpoint]\ncow_fraction = 0\n");  // an integer is a number too
  ASSERT_TRUE(i.ok()) << i.status().ToString();
  EXPECT_EQ(i->cow_fraction, 0.0);
  for (const char* name : {"copy", "zero-copy"}) {
    auto p = ParseCaptureMode(name);
    ASSERT_TRUE(p.ok()) << name;
    EXPECT_STREQ(CaptureModeName(*p), name);
  }
  const std::pair<const char*, const char*> bad[] = {
      {"[checkpoint]\ncapture = \"zerocopy\"\n", "'zerocopy' is not a capture mode (copy, zero-copy)"},
      {"[checkpoint]\ncow_fraction = \"5%\"\n", "must be a number"},
      {"[checkpoint]\ncow_fraction = 1.5\n", "checkpoint.cow_fraction (CAIRN_COW) is 1.5"},
      {"[checkpoint]\ncow_fraction = -0.1\n", "it must be between 0 and 1"},
  };
  for (const auto& [toml, message] : bad) EXPECT_CONTAINS(ErrorOf(toml), message);
  ::setenv("CAIRN_CAPTURE", "zero-copy", 1);
  ::setenv("CAIRN_COW", "0.025", 1);
  auto env = Parse("[checkpoint]\ncapture = \"copy\"\ncow_fraction = 0.5\n", true);
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->capture, CaptureMode::kZeroCopy);
  EXPECT_DOUBLE_EQ(env->cow_fraction, 0.025);
  for (const auto& [name, value] : {std::pair{"CAIRN_CAPTURE", "fast"}, std::pair{"CAIRN_COW", "0.05x"},
                                    std::pair{"CAIRN_COW", "2"}}) {
    ::setenv(name, value, 1);
    auto e = Parse("", true);
    ::unsetenv(name);
    ASSERT_FALSE(e.ok()) << name << "=" << value;
    EXPECT_CONTAINS(e.status().message(), name);
  }
  ::unsetenv("CAIRN_CAPTURE");
  ::unsetenv("CAIRN_COW");
}

// checkpoint.mtbf_s: seconds, 0 (the default) = not set; TOML and CAIRN_MTBF.
TEST_F(ConfigTest, MtbfKey) {
  EXPECT_EQ(DefaultConfig().mtbf_s, 0);
  auto r = Parse("[checkpoint]\nmtbf_s = 3600\n");  // an integer is a number too
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_DOUBLE_EQ(r->mtbf_s, 3600);
  r = Parse("[checkpoint]\nmtbf_s = 1.5e4\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_DOUBLE_EQ(r->mtbf_s, 15000);
  const std::pair<const char*, const char*> bad[] = {
      {"[checkpoint]\nmtbf_s = \"1h\"\n", "key 'checkpoint.mtbf_s' in cairn.toml (line 2) must be a number, not a string"},
      {"[checkpoint]\nmtbf_s = -1\n", "checkpoint.mtbf_s (CAIRN_MTBF) is -1; it must be a number of seconds >= 0"},
      {"[checkpoint]\nmtbf_s = inf\n", "checkpoint.mtbf_s (CAIRN_MTBF) is inf"},
      {"[checkpoint]\nmtbf_s = nan\n", "checkpoint.mtbf_s (CAIRN_MTBF) is nan"},
  };
  for (const auto& [toml, message] : bad) EXPECT_CONTAINS(ErrorOf(toml), message);
  ::setenv("CAIRN_MTBF", "86400", 1);
  auto env = Parse("[checkpoint]\nmtbf_s = 60\n", true);
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_DOUBLE_EQ(env->mtbf_s, 86400);
  for (const char* value : {"1h", "", "-5", "inf"}) {
    ::setenv("CAIRN_MTBF", value, 1);
    auto e = Parse("", true);
    ASSERT_FALSE(e.ok()) << "CAIRN_MTBF=" << value;
    EXPECT_CONTAINS(e.status().message(), "CAIRN_MTBF");
  }
  ::unsetenv("CAIRN_MTBF");
}

TEST_F(ConfigTest, WriteProtectKey) {
  EXPECT_EQ(DefaultConfig().write_protect, WriteProtectMode::kAuto);
  for (const char* name : {"auto", "userfaultfd", "mprotect"}) {
    auto p = ParseWriteProtectMode(name);
    ASSERT_TRUE(p.ok()) << name;
    EXPECT_STREQ(WriteProtectModeName(*p), name);
  }
  auto r = Parse("[checkpoint]\nwrite_protect = \"mprotect\"\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->write_protect, WriteProtectMode::kMprotect);
  EXPECT_CONTAINS(ErrorOf("[checkpoint]\nwrite_protect = \"sigsegv\"\n"),
                  "'sigsegv' is not a write protection (auto, userfaultfd, mprotect)");
  EXPECT_CONTAINS(ErrorOf("[checkpoint]\nwrite_protect = 1\n"), "a string (auto, userfaultfd, mprotect)");
  ::setenv("CAIRN_WRITE_PROTECT", "userfaultfd", 1);
  auto env = Parse("[checkpoint]\nwrite_protect = \"mprotect\"\n", true);
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->write_protect, WriteProtectMode::kUserfaultfd);
  ::setenv("CAIRN_WRITE_PROTECT", "uffd", 1);
  auto e = Parse("", true);
  ::unsetenv("CAIRN_WRITE_PROTECT");
  ASSERT_FALSE(e.ok());
  EXPECT_CONTAINS(e.status().message(), "CAIRN_WRITE_PROTECT");
}

}  // namespace
}  // namespace cairn
