#include "format/placement.hpp"

#include <unistd.h>

#include <cstdio>
#include <set>

#include "format/file_reader.hpp"
#include "format/le.hpp"
#include "util/crc32c.hpp"

namespace cairn::format {

namespace {

constexpr char kMagic[8] = {'C', 'A', 'I', 'R', 'N', 'P', 'L', 'C'};
constexpr size_t kRecordHeaderBytes = 56;
constexpr size_t kMaxRecordBytes = 64u << 20;

void Put32(std::string* out, uint32_t v) {
  uint8_t b[4];
  le::Put32(b, v);
  out->append(reinterpret_cast<const char*>(b), 4);
}
void Put64(std::string* out, uint64_t v) {
  uint8_t b[8];
  le::Put64(b, v);
  out->append(reinterpret_cast<const char*>(b), 8);
}

// Bounds-checked little-endian reads over the record.
class Cursor {
 public:
  explicit Cursor(std::string_view b) : b_(b) {}
  bool Need(size_t n) const { return pos_ + n <= b_.size(); }
  uint32_t U32() {
    uint32_t v = le::Get32(reinterpret_cast<const uint8_t*>(b_.data()) + pos_);
    pos_ += 4;
    return v;
  }
  uint64_t U64() {
    uint64_t v = le::Get64(reinterpret_cast<const uint8_t*>(b_.data()) + pos_);
    pos_ += 8;
    return v;
  }
  size_t pos() const { return pos_; }

 private:
  std::string_view b_;
  size_t pos_ = 0;
};

Status Bad(const std::string& what) { return Status::Corrupt("placement record: " + what); }

Status DecodeRegion(Cursor& c, uint32_t node_count, RegionPlacement* r) {
  if (!c.Need(16)) return Bad("region entry past the end");
  r->id = static_cast<int32_t>(c.U32());
  const uint32_t runs = c.U32();
  r->bytes = c.U64();
  const std::string label = "region " + std::to_string(r->id);
  if (!c.Need(16ull * runs)) return Bad(label + ": " + std::to_string(runs) + " runs past the end");
  uint64_t total = 0;
  for (uint32_t i = 0; i < runs; ++i) {
    PlacementRun run{.node = static_cast<int32_t>(c.U32())};
    if (c.U32() != 0) return Bad(label + ": run " + std::to_string(i) + ": reserved not zero");
    run.bytes = c.U64();
    if (run.bytes == 0) return Bad(label + ": run " + std::to_string(i) + " is empty");
    if (run.node < -1 || run.node >= static_cast<int64_t>(node_count)) {
      return Bad(label + ": run " + std::to_string(i) + " on node " + std::to_string(run.node) + " of " +
                 std::to_string(node_count));
    }
    if (!r->runs.empty() && r->runs.back().node == run.node) {
      return Bad(label + ": runs " + std::to_string(i - 1) + " and " + std::to_string(i) + " share a node");
    }
    if (run.bytes > r->bytes - total) return Bad(label + ": runs exceed the region's " + std::to_string(r->bytes) + " bytes");
    total += run.bytes;
    r->runs.push_back(run);
  }
  if (total != r->bytes) {
    return Bad(label + ": runs cover " + std::to_string(total) + " of " + std::to_string(r->bytes) + " bytes");
  }
  return Status::Ok();
}

Status DecodeThread(Cursor& c, ThreadAffinity* t) {
  if (!c.Need(8)) return Bad("thread entry past the end");
  t->index = static_cast<int32_t>(c.U32());
  const uint32_t n = c.U32();
  const std::string label = "thread " + std::to_string(t->index);
  if (t->index < kCheckpointingThread) return Bad(label + ": bad index");
  if (n == 0) return Bad(label + ": no cpus");
  if (!c.Need(4ull * n)) return Bad(label + ": cpus past the end");
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t cpu = c.U32();
    if (cpu >= 65536 || (!t->cpus.empty() && static_cast<int>(cpu) <= t->cpus.back())) {
      return Bad(label + ": cpu list not strictly ascending below 65536 at cpu " + std::to_string(cpu));
    }
    t->cpus.push_back(static_cast<int>(cpu));
  }
  return Status::Ok();
}

}  // namespace

const RegionPlacement* Placement::region(int32_t id) const {
  for (const auto& r : regions) {
    if (r.id == id) return &r;
  }
  return nullptr;
}

const ThreadAffinity* Placement::thread(int32_t index) const {
  for (const auto& t : threads) {
    if (t.index == index) return &t;
  }
  return nullptr;
}

void AppendRun(std::vector<PlacementRun>* runs, int32_t node, uint64_t bytes) {
  if (bytes == 0) return;
  if (!runs->empty() && runs->back().node == node) {
    runs->back().bytes += bytes;
  } else {
    runs->push_back({node, bytes});
  }
}

std::string EncodePlacement(const Placement& p) {
  std::string out(kMagic, sizeof kMagic);
  Put32(&out, kPlacementRecordVersion);
  Put32(&out, 0);
  Put64(&out, static_cast<uint64_t>(p.number));
  Put64(&out, static_cast<uint64_t>(p.data_created_ns));
  Put32(&out, p.node_count);
  Put32(&out, p.cpu_count);
  Put32(&out, static_cast<uint32_t>(p.regions.size()));
  Put32(&out, static_cast<uint32_t>(p.threads.size()));
  Put32(&out, p.granule_bytes);
  Put32(&out, 0);
  for (const auto& r : p.regions) {
    Put32(&out, static_cast<uint32_t>(r.id));
    Put32(&out, static_cast<uint32_t>(r.runs.size()));
    Put64(&out, r.bytes);
    for (const auto& run : r.runs) {
      Put32(&out, static_cast<uint32_t>(run.node));
      Put32(&out, 0);
      Put64(&out, run.bytes);
    }
  }
  for (const auto& t : p.threads) {
    Put32(&out, static_cast<uint32_t>(t.index));
    Put32(&out, static_cast<uint32_t>(t.cpus.size()));
    for (int cpu : t.cpus) Put32(&out, static_cast<uint32_t>(cpu));
  }
  Put32(&out, crc32c::Value(out.data(), out.size()));
  return out;
}

Result<Placement> DecodePlacement(std::string_view b) {
  if (b.size() < kRecordHeaderBytes + 4) return Bad(std::to_string(b.size()) + " bytes, too short");
  if (b.size() > kMaxRecordBytes) return Bad(std::to_string(b.size()) + " bytes, too large");
  if (b.substr(0, 8) != std::string_view(kMagic, 8)) return Bad("bad magic");
  Cursor c(b);
  c.U64();
  const uint32_t version = c.U32();
  if (version != kPlacementRecordVersion) {
    return Status::Unsupported("unknown placement record version " + std::to_string(version) + " (this build reads 1)");
  }
  const uint32_t stored = le::Get32(reinterpret_cast<const uint8_t*>(b.data()) + b.size() - 4);
  const uint32_t computed = crc32c::Value(b.data(), b.size() - 4);
  if (stored != computed) return Bad("checksum mismatch");
  if (c.U32() != 0) return Bad("reserved not zero");
  Placement p;
  p.number = static_cast<int64_t>(c.U64());
  p.data_created_ns = static_cast<int64_t>(c.U64());
  p.node_count = c.U32();
  p.cpu_count = c.U32();
  const uint32_t regions = c.U32(), threads = c.U32();
  p.granule_bytes = c.U32();
  if (c.U32() != 0) return Bad("reserved not zero");
  if (p.node_count == 0 || p.cpu_count == 0) return Bad("no nodes or no cpus");
  if (p.granule_bytes < 4096 || (p.granule_bytes & (p.granule_bytes - 1)) != 0) {
    return Bad("granule of " + std::to_string(p.granule_bytes) + " bytes");
  }
  const std::string_view body = b.substr(0, b.size() - 4);
  Cursor body_cursor(body);
  for (size_t i = 0; i < kRecordHeaderBytes / 4; ++i) body_cursor.U32();
  std::set<int32_t> ids;
  for (uint32_t i = 0; i < regions; ++i) {
    RegionPlacement r;
    CAIRN_RETURN_IF_ERROR(DecodeRegion(body_cursor, p.node_count, &r));
    if (!ids.insert(r.id).second) return Bad("region " + std::to_string(r.id) + " listed twice");
    p.regions.push_back(std::move(r));
  }
  std::set<int32_t> indexes;
  for (uint32_t i = 0; i < threads; ++i) {
    ThreadAffinity t;
    CAIRN_RETURN_IF_ERROR(DecodeThread(body_cursor, &t));
    if (!indexes.insert(t.index).second) return Bad("thread " + std::to_string(t.index) + " listed twice");
    p.threads.push_back(std::move(t));
  }
  if (body_cursor.pos() != body.size()) {
    return Bad(std::to_string(body.size() - body_cursor.pos()) + " bytes after the last entry");
  }
  return p;
}

std::string PlacementPath(const std::string& dir, std::string_view name, int64_t number) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "v%020lld.placement", static_cast<long long>(number));
  return os::JoinPath(os::JoinPath(dir, std::string(name)), buf);
}

Status WritePlacement(os::FileSystem* fs, const std::string& path, const Placement& p) {
  const size_t slash = path.rfind('/');
  const std::string temp = path.substr(0, slash + 1) + "." + path.substr(slash + 1) + "." +
                           std::to_string(::getpid()) + ".tmp";
  const std::string bytes = EncodePlacement(p);
  {
    CAIRN_ASSIGN_OR_RETURN(auto f, fs->Open(temp, os::OpenOptions{.write = true}));
    Status s = f->WriteAt(bytes.data(), bytes.size(), 0);
    if (s.ok()) s = f->Close();
    if (!s.ok()) {
      (void)fs->Remove(temp);
      return s;
    }
  }
  Status s = fs->Rename(temp, path);
  if (!s.ok()) (void)fs->Remove(temp);
  return s;
}

Result<Placement> ReadPlacement(os::FileSystem* fs, const std::string& path, int64_t number,
                                int64_t data_created_ns) {
  CAIRN_ASSIGN_OR_RETURN(auto f, fs->Open(path, os::OpenOptions{}));
  CAIRN_ASSIGN_OR_RETURN(const uint64_t size, f->Size());
  if (size > kMaxRecordBytes) return Status::Corrupt(path + ": placement record: " + std::to_string(size) + " bytes, too large");
  std::string bytes(size, '\0');
  CAIRN_RETURN_IF_ERROR(f->ReadAt(bytes.data(), size, 0));
  auto p = DecodePlacement(bytes);
  if (!p.ok()) return p.status().WithContext(path);
  if (p->number != number) {
    return Status::Corrupt(path + ": placement record of version " + std::to_string(p->number) + ", expected " +
                           std::to_string(number));
  }
  if (p->data_created_ns != data_created_ns) {
    return Status::State(path + ": placement record belongs to an earlier file of version " + std::to_string(number) +
                         " (data file created at " + std::to_string(data_created_ns) + " ns, record for " +
                         std::to_string(p->data_created_ns) + ")");
  }
  return p;
}

std::string PlacementPathOf(const std::string& data_path) {
  constexpr std::string_view kData = ".cairn";
  if (data_path.size() >= kData.size() && data_path.compare(data_path.size() - kData.size(), kData.size(), kData) == 0) {
    return data_path.substr(0, data_path.size() - kData.size()) + ".placement";
  }
  return data_path + ".placement";
}

Result<Placement> ReadPlacementOf(os::FileSystem* fs, const std::string& data_path) {
  CAIRN_ASSIGN_OR_RETURN(auto reader, FileReader::Open(fs, data_path));
  return ReadPlacement(fs, PlacementPathOf(data_path), reader->info().number, reader->info().created_unix_ns);
}

void CopyPlacement(os::FileSystem* fs, const std::string& from_data, const std::string& to_data) {
  const std::string from = PlacementPathOf(from_data);
  auto f = fs->Open(from, os::OpenOptions{});
  if (!f.ok()) return;
  auto size = (*f)->Size();
  if (!size.ok() || *size > kMaxRecordBytes) return;
  std::string bytes(*size, '\0');
  if (!(*f)->ReadAt(bytes.data(), bytes.size(), 0).ok()) return;
  auto p = DecodePlacement(bytes);
  if (p.ok()) (void)WritePlacement(fs, PlacementPathOf(to_data), *p);
}

}  // namespace cairn::format
