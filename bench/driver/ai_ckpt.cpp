// cairn-bench ai-ckpt (docs/bench.md, "Zero-copy checkpoints (AI-Ckpt)"):
// one region of --size bytes from cairn::Alloc; each iteration writes every
// page once in the --pattern order, with --compute-ms of busy compute spread
// evenly over the pages (so first writes are spread over the epoch, as in a
// solver); a checkpoint after every --every iterations, and a wait for the
// last one at the end. Every mode runs in one process, interleaved round by
// round (none, sync, copy, zero_copy, zero_copy_learned, copy_same_memory),
// medians of --repeat rounds:
//   none               no checkpoint (the baseline)
//   sync               write + fsync of the region on the application thread
//   copy               Cairn, checkpoint.capture = copy (its cache holds S)
//   zero_copy          Cairn zero-copy, checkpoint.zero_copy_order = address
//   zero_copy_learned  Cairn zero-copy, learned order
//   copy_same_memory   Cairn copy mode given only zero-copy's extra memory
//                      (a host cache of the COW buffer + bookkeeping +
//                      staging cache): what zero-copy saves its memory from
#include "driver/ai_ckpt.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "driver/bench.hpp"
#include "capture/zero_copy/zero_copy.hpp"
#include "common/files.hpp"
#include "common/json.hpp"
#include "common/parse.hpp"

namespace cairn::bench {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// flipping: reversed on odd epochs, forward on even ones (an order that
// changes between epochs, which a learned order cannot predict).
enum class Pattern { kSequential, kReversed, kRandom, kIrregular, kFlipping };
constexpr const char* kPatterns[] = {"sequential", "reversed", "random", "irregular", "flipping"};  // by Pattern
std::optional<Pattern> PatternNamed(std::string_view name) {
  for (int p = 0; p < static_cast<int>(std::size(kPatterns)); ++p) {
    if (name == kPatterns[p]) return static_cast<Pattern>(p);
  }
  return std::nullopt;
}
constexpr const char* kModes[] = {"none", "sync", "copy", "zero_copy", "zero_copy_learned", "copy_same_memory"};
constexpr int kModeCount = 6;
constexpr int kCopyMode = 2, kCopySameMemoryMode = 5;
bool IsCopy(int mode) { return mode == kCopyMode || mode == kCopySameMemoryMode; }
bool IsZeroCopy(int mode) { return mode == 3 || mode == 4; }

struct AiOptions {
  uint64_t size = 64ull << 20;
  Pattern pattern = Pattern::kSequential;
  double cow = 0.05;
  uint64_t iterations = 8;
  uint64_t every = 2;
  double compute_ms = 200;  // per iteration
  double moved = 0.1;       // irregular: fraction of pages moved, redrawn every epoch
  Pattern base = Pattern::kSequential;  // irregular: the order pages are moved from (not kIrregular)
  WriteProtectMode write_protect = WriteProtectMode::kAuto;  // zero-copy modes (checkpoint.write_protect)
  uint64_t repeat = 3;
  std::string json_path, dir;
  bool quiet = false;
};

const char* kUsage =
    "usage: cairn-bench ai-ckpt [--size S] [--pattern sequential|reversed|random|irregular|flipping] [--cow F]\n"
    "         [--iterations N] [--every K] [--compute-ms C] [--moved X] [--base sequential|reversed|random]\n"
    "         [--write-protect auto|userfaultfd|mprotect]\n"
    "         [--repeat R] [--dir D] [--json FILE] [--quiet]\n";

Result<double> ParseFraction(std::string_view opt, const std::string& v) {
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !(d >= 0 && d <= 1)) return Bad(opt, "'" + v + "' is not a number between 0 and 1");
  return d;
}

Result<AiOptions> Parse(int argc, char** argv) {
  AiOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quiet") {
      o.quiet = true;
      continue;
    }
    if (i + 1 >= argc) return Bad(a, a.rfind("--", 0) == 0 ? "needs a value" : "unknown argument");
    const std::string v = argv[++i];
    if (a == "--size") {
      CAIRN_ASSIGN_OR_RETURN(o.size, ParseBytes(a, v));
    } else if (a == "--pattern") {
      const std::optional<Pattern> p = PatternNamed(v);
      if (!p) return Bad(a, "'" + v + "' is not sequential, reversed, random, irregular or flipping");
      o.pattern = *p;
    } else if (a == "--cow") {
      CAIRN_ASSIGN_OR_RETURN(o.cow, ParseFraction(a, v));
    } else if (a == "--base") {
      const std::optional<Pattern> p = PatternNamed(v);
      if (!p || *p == Pattern::kIrregular || *p == Pattern::kFlipping) {
        return Bad(a, "'" + v + "' is not sequential, reversed or random");
      }
      o.base = *p;
    } else if (a == "--moved") {
      CAIRN_ASSIGN_OR_RETURN(o.moved, ParseFraction(a, v));
    } else if (a == "--iterations") {
      CAIRN_ASSIGN_OR_RETURN(o.iterations, ParseCount(a, v, 1));
    } else if (a == "--every") {
      CAIRN_ASSIGN_OR_RETURN(o.every, ParseCount(a, v, 1));
    } else if (a == "--repeat") {
      CAIRN_ASSIGN_OR_RETURN(o.repeat, ParseCount(a, v, 1));
    } else if (a == "--compute-ms") {
      char* end = nullptr;
      o.compute_ms = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(o.compute_ms >= 0)) return Bad(a, "'" + v + "' is not a time in ms >= 0");
    } else if (a == "--write-protect") {
      CAIRN_ASSIGN_OR_RETURN(o.write_protect, ParseWriteProtectMode(v));
    } else if (a == "--json") {
      o.json_path = v;
    } else if (a == "--dir") {
      o.dir = v;
    } else {
      return Bad(a, "unknown option");
    }
  }
  return o;
}

// The page order of the epoch's iterations (the same for every mode).
std::vector<uint32_t> PageOrder(const AiOptions& o, size_t pages, uint64_t epoch) {
  std::vector<uint32_t> order(pages);
  std::iota(order.begin(), order.end(), 0u);
  const Pattern regular = o.pattern == Pattern::kIrregular ? o.base : o.pattern;
  const bool odd = epoch % 2 == 1;
  if (regular == Pattern::kReversed || (regular == Pattern::kFlipping && odd)) {
    std::reverse(order.begin(), order.end());
  }
  if (regular == Pattern::kRandom) std::shuffle(order.begin(), order.end(), std::mt19937_64(42));
  if (o.pattern == Pattern::kIrregular) {  // moved pages go to random places, new ones every epoch
    std::mt19937_64 rng(1000 + epoch);
    const auto moves = static_cast<size_t>(o.moved * static_cast<double>(pages));
    for (size_t m = 0; m < moves && pages > 1; ++m) std::swap(order[rng() % pages], order[rng() % pages]);
  }
  return order;
}

void SpinFor(double seconds) {
  const auto t = Clock::now();
  while (Since(t) < seconds) {
  }
}

struct ModeRun {
  double runtime_s = 0;
  std::vector<double> call_s;
  uint64_t red = 0, orange = 0, blue = 0, watch_faults = 0, extra_bytes = 0, huge_restored = 0;
  uint64_t address_epochs = 0;         // learned order: epochs that fell back to address order
  double red_wait_s = 0, fault_s = 0;  // the application's time blocked in RED faults; the handler's time
  double capture_s = 0;  // per version: the call to its last byte in the cache (zero-copy: the reader's pass)
};

Status SyncCheckpoint(const std::string& dir, uint64_t v, const uint8_t* data, size_t n) {
  const std::string path = dir + "/v" + std::to_string(v);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Io("open " + path + ": " + std::strerror(errno));
  Status s = WriteAll(fd, data, n, 0, path);
  if (s.ok() && ::fsync(fd) != 0) s = Status::Io("fsync " + path + ": " + std::strerror(errno));
  ::close(fd);
  return s;
}

// Zero-copy's staging cache: a few small blocks (the reader's order works
// block by block).
constexpr uint64_t kZeroCopyCache = 4ull << 20, kZeroCopyBlock = 256ull << 10;

// What zero-copy holds beside the application's memory: the COW buffer, the
// per-page bookkeeping and its staging cache.
uint64_t ZeroCopyExtraBytes(const AiOptions& o, uint64_t cache_bytes) {
  return core::ZeroCopy::CowBytes(o.cow, o.size) + o.size / 4096 * core::ZeroCopy::kMetadataBytesPerPage +
         cache_bytes;
}

Config CairnConfig(const AiOptions& o, int mode, const std::string& dir) {
  Config c = DefaultConfig();
  c.scratch_dir = dir;
  c.keep_versions = 2;
  c.capture = IsCopy(mode) ? CaptureMode::kCopy : CaptureMode::kZeroCopy;
  c.cow_fraction = o.cow;
  c.write_protect = o.write_protect;
  c.zero_copy_order = mode == 4 ? "learned" : "address";
  // copy: a cache that holds a version; copy_same_memory: one as large as
  // zero-copy's extra memory (the capture streams through it).
  c.block_bytes = IsCopy(mode) ? (4ull << 20) : kZeroCopyBlock;
  c.host_cache_bytes = kZeroCopyCache;
  if (mode == kCopyMode) c.host_cache_bytes = std::max<uint64_t>(o.size + (8ull << 20), 16ull << 20);
  if (mode == kCopySameMemoryMode) c.host_cache_bytes = ZeroCopyExtraBytes(o, kZeroCopyCache) / c.block_bytes * c.block_bytes;
  c.host_cache_bytes = std::max<uint64_t>(c.host_cache_bytes, 2 * c.block_bytes);
  c.init = CacheInit::kEager;  // eager: the cache keeps its size (no growth at Protect)
  return c;
}

Result<ModeRun> RunMode(const AiOptions& o, int mode, uint8_t* mem, const std::string& dir) {
  const size_t page = 4096, pages = o.size / page;
  const double per_page_s = o.compute_ms * 1e-3 / static_cast<double>(pages);
  CAIRN_RETURN_IF_ERROR(EmptyDir(dir));
  std::unique_ptr<Client> c;
  if (mode >= 2) {
    CAIRN_ASSIGN_OR_RETURN(c, Client::Open(CairnConfig(o, mode, dir)));
    CAIRN_RETURN_IF_ERROR(c->Protect(1, mem, o.size));
  }
  ModeRun r;
  const auto t0 = Clock::now();
  std::vector<uint32_t> order;
  for (uint64_t it = 0; it < o.iterations; ++it) {
    if (it % o.every == 0) order = PageOrder(o, pages, it / o.every);
    for (const uint32_t p : order) {
      std::memset(mem + size_t{p} * page, static_cast<int>(it + 1), page);
      SpinFor(per_page_s);
    }
    if ((it + 1) % o.every != 0 || mode == 0) continue;
    const int64_t v = static_cast<int64_t>((it + 1) / o.every);
    const auto c0 = Clock::now();
    if (mode == 1) {
      CAIRN_RETURN_IF_ERROR(SyncCheckpoint(dir, static_cast<uint64_t>(v), mem, o.size));
    } else {
      CAIRN_RETURN_IF_ERROR(c->Checkpoint("app", v));
    }
    r.call_s.push_back(Since(c0));
  }
  if (c && !r.call_s.empty()) {
    CAIRN_RETURN_IF_ERROR(c->Wait("app", static_cast<int64_t>(r.call_s.size()), Level::kLocal));
  }
  r.runtime_s = Since(t0);
  if (c) {
    const Stats s = c->GetStats();
    r.red = s.zero_copy.red;
    r.orange = s.zero_copy.orange;
    r.blue = s.zero_copy.blue;
    r.watch_faults = s.zero_copy.watch_faults;
    r.huge_restored = s.zero_copy.huge_restored_bytes;
    r.address_epochs = s.zero_copy.address_epochs;
    r.red_wait_s = s.zero_copy.red_wait_s;
    r.fault_s = s.zero_copy.fault_s;
    if (s.capture.ops > 0) r.capture_s = (s.capture.seconds + s.capture_blocked_s) / static_cast<double>(s.capture.ops);
    if (IsCopy(mode)) {
      r.extra_bytes = s.cache_capacity_bytes;
    } else {
      r.extra_bytes = ZeroCopyExtraBytes(o, s.cache_capacity_bytes);
      if (s.zero_copy.fallbacks > 0) return Status::Unsupported("zero-copy unavailable: " + s.zero_copy.note);
    }
    CAIRN_RETURN_IF_ERROR(c->Close());
  }
  return r;
}

Json Report(const AiOptions& o, const std::vector<std::vector<ModeRun>>& runs) {
  auto median = [&](int m, auto field) {
    std::vector<double> v;
    for (const ModeRun& r : runs[m]) v.push_back(static_cast<double>(field(r)));
    return Median(v);
  };
  const double base = median(0, [](const ModeRun& r) { return r.runtime_s; });
  Json runtime = Json::Object(), increase = Json::Object(), memory = Json::Object(),
       red = Json::Object(), orange = Json::Object(), blue = Json::Object(), watch = Json::Object(),
       huge = Json::Object(), red_wait = Json::Object(), fault = Json::Object(),
       calls = Json::Object(), address_epochs = Json::Object(), first_calls = Json::Object(),
       capture = Json::Object();
  for (int m = 0; m < kModeCount; ++m) {
    const double rt = median(m, [](const ModeRun& r) { return r.runtime_s; });
    runtime.Set(kModes[m], rt);
    if (m == 0) continue;
    increase.Set(kModes[m], rt - base);
    memory.Set(kModes[m], static_cast<uint64_t>(median(m, [](const ModeRun& r) { return r.extra_bytes; })));
    std::vector<double> all;
    for (const ModeRun& r : runs[m]) all.insert(all.end(), r.call_s.begin(), r.call_s.end());
    calls.Set(kModes[m], Median(all));
    first_calls.Set(kModes[m], median(m, [](const ModeRun& r) { return r.call_s.empty() ? 0.0 : r.call_s[0]; }));
    if (m >= 2) capture.Set(kModes[m], median(m, [](const ModeRun& r) { return r.capture_s; }));
    if (IsZeroCopy(m)) {
      red.Set(kModes[m], median(m, [](const ModeRun& r) { return r.red; }));
      orange.Set(kModes[m], median(m, [](const ModeRun& r) { return r.orange; }));
      blue.Set(kModes[m], median(m, [](const ModeRun& r) { return r.blue; }));
      watch.Set(kModes[m], median(m, [](const ModeRun& r) { return r.watch_faults; }));
      huge.Set(kModes[m], median(m, [](const ModeRun& r) { return r.huge_restored; }));
      address_epochs.Set(kModes[m], median(m, [](const ModeRun& r) { return r.address_epochs; }));
      red_wait.Set(kModes[m], median(m, [](const ModeRun& r) { return r.red_wait_s; }));
      fault.Set(kModes[m], median(m, [](const ModeRun& r) { return r.fault_s; }));
    }
  }
  Json a = Json::Object();
  a.Set("size_bytes", o.size)
      .Set("pattern", kPatterns[static_cast<int>(o.pattern)])
      .Set("cow_fraction", o.cow)
      .Set("moved", o.pattern == Pattern::kIrregular ? o.moved : 0.0)
      .Set("base", o.pattern == Pattern::kIrregular ? kPatterns[static_cast<int>(o.base)] : "")
      .Set("write_protect", WriteProtectModeName(o.write_protect))
      .Set("iterations", o.iterations)
      .Set("every", o.every)
      .Set("compute_ms", o.compute_ms)
      .Set("repeat", o.repeat)
      .Set("checkpoint_call_s", calls.Number("zero_copy_learned").value_or(0))
      .Set("call_s", calls)
      .Set("first_call_s", first_calls)
      .Set("capture_s", capture)
      .Set("runtime_s", runtime)
      .Set("runtime_increase_s", increase)
      .Set("extra_memory_bytes", memory)
      .Set("red", red)
      .Set("orange", orange)
      .Set("blue", blue)
      .Set("watch_faults", watch)
      .Set("huge_restored_bytes", huge)
      .Set("address_epochs", address_epochs)
      .Set("red_wait_s", red_wait)
      .Set("fault_s", fault);
  Json doc = Json::Object();
  doc.Set("ai_ckpt", a);
  return doc;
}

Status Run(const AiOptions& o) {
  if (o.size % 4096 != 0) return Bad("--size", "must be a multiple of 4 KiB");
  std::string dir = o.dir;
  bool created = false;
  if (dir.empty()) {
    CAIRN_ASSIGN_OR_RETURN(dir, MakeTempDir());
    created = true;
  }
  auto mem = TrackedBuffer::Create(o.size);
  if (!mem.ok()) return mem.status();
  auto* p = static_cast<uint8_t*>(mem->data());
  std::memset(p, 0, o.size);
  std::vector<std::vector<ModeRun>> runs(kModeCount);
  // An untimed warm-up round of the application alone: the first pass over
  // fresh memory is slower on this VM (docs/bench.md, memory-state contract).
  Status s = RunMode(o, 0, p, dir + "/warmup").status();
  for (uint64_t round = 0; round < o.repeat && s.ok(); ++round) {
    for (int m = 0; m < kModeCount && s.ok(); ++m) {
      auto r = RunMode(o, m, p, dir + "/" + kModes[m]);
      if (!r.ok()) {
        s = r.status().WithContext(std::string("mode ") + kModes[m]);
        break;
      }
      if (!o.quiet) {
        std::fprintf(stderr, "[%s %llu/%llu] runtime %.3f s, checkpoint calls %.4f s median, red %llu, orange %llu\n",
                     kModes[m], static_cast<unsigned long long>(round + 1),
                     static_cast<unsigned long long>(o.repeat), r->runtime_s, Median(r->call_s),
                     static_cast<unsigned long long>(r->red), static_cast<unsigned long long>(r->orange));
      }
      runs[m].push_back(std::move(*r));
    }
  }
  if (created) (void)RemoveTree(dir);
  CAIRN_RETURN_IF_ERROR(s);
  const Json doc = Report(o, runs);
  std::printf("%s\n", doc.Dump().c_str());
  if (!o.json_path.empty()) {
    std::ofstream f(o.json_path);
    f << doc.Dump() << "\n";
    if (!f) return Status::Io("cannot write " + o.json_path);
  }
  return Status::Ok();
}

}  // namespace

int RunAiCkpt(int argc, char** argv) {
  auto o = Parse(argc, argv);
  if (!o.ok()) {
    std::fprintf(stderr, "cairn-bench ai-ckpt: %s\n%s", o.status().message().c_str(), kUsage);
    return 2;
  }
  if (Status s = Run(*o); !s.ok()) {
    std::fprintf(stderr, "cairn-bench ai-ckpt: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace cairn::bench
