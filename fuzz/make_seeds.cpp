// cairn_fuzz_seeds DIR [manifest|partner_head|partner_messages|parity_header|bundle]: writes the
// seed corpus of fuzz_file_reader (or of fuzz_manifest, fuzz_partner_head,
// fuzz_partner_messages, fuzz_parity_header, fuzz_bundle: below), small
// valid data files (format versions 1 and 2, full and layered) made by the
// library's own FileWriter (docs/design.md, "Fuzzing"). Run once when the
// format changes and commit the files:
//   cmake --build build --target cairn_fuzz_seeds
//   build/bin/cairn_fuzz_seeds fuzz/corpus/file_reader
// The files are deterministic (fixed contents and creation time). Blocks are
// 4 KiB, the smallest the format allows, so that each file has several
// blocks in a few KiB; FuzzCorpus.FileReaderSeedsAreValidFiles checks that
// each still verifies.
#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "format/file_writer.hpp"
#include "format/layout.hpp"
#include "os/fs/fs.hpp"
#include "redundancy/manifest.hpp"
#include "redundancy/parity/header.hpp"
#include "redundancy/partner/head.hpp"
#include "redundancy/partner/messages.hpp"
#include "redundancy/redundancy.hpp"
#include "util/crc32c.hpp"

namespace {

using cairn::MemoryKind;
using cairn::Status;
using namespace cairn::format;

struct Seed {
  const char* file;
  EntryKind kind;
  const char* name;
  int64_t number;
  std::vector<RegionSpec> regions;
  // Format version 2 (docs/format.md 4) when set: the extents each region
  // stores (empty list = FullExtents) and the version record.
  bool v2 = false;
  std::vector<cairn::ExtentList> extents = {};
  VersionRecord record = {};
};

Status Write(const std::string& dir, const Seed& seed) {
  const Layout layout =
      !seed.v2 ? Layout::Make(seed.regions, 4096)
               : Layout::MakeV2(seed.regions,
                                seed.extents.empty() ? Layout::FullExtents(seed.regions) : seed.extents,
                                4096, seed.record);
  FileInfo info{.kind = seed.kind, .name = seed.name, .number = seed.number,
                .created_unix_ns = 1'800'000'000'000'000'000};
  CAIRN_ASSIGN_OR_RETURN(auto w, FileWriter::Create(cairn::os::FileSystem::Default(),
                                                    dir + "/" + seed.file, info, layout,
                                                    WriterOptions{.fsync = false}));
  std::vector<uint8_t> data(layout.block_bytes);
  uint32_t x = static_cast<uint32_t>(seed.number) * 2654435761u + 1;
  for (uint32_t i = 0; i < layout.blocks.size(); ++i) {
    const uint32_t n = layout.blocks[i].length;
    for (uint32_t k = 0; k < n; ++k) data[k] = static_cast<uint8_t>((x = x * 1103515245u + 12345u) >> 24);
    CAIRN_RETURN_IF_ERROR(w->WriteBlock(i, data.data(), cairn::crc32c::Value(data.data(), n)));
  }
  return w->Commit();
}

}  // namespace

// fuzz_manifest's seeds: manifests written by the library (version 2), and
// a version 1 text file as older builds wrote it.
int Manifests(const std::string& dir) {
  cairn::Config c;
  c.fsync = false;
  auto* fs = cairn::os::FileSystem::Default();
  const std::string tmp = dir + "/.make";
  struct {
    const char* file;
    cairn::collective::Manifest shape;
    int64_t committed, persistent;
  } seeds[] = {{"v2-committed", {.ranks = 4}, 7, -1},
               {"v2-persistent-simulated", {.ranks = 8, .ranks_per_node = 2}, 12, 10}};
  for (const auto& s : seeds) {
    Status st =
        cairn::collective::RecordGlobal(fs, c, tmp, "m", s.shape, s.committed, s.persistent);
    if (st.ok()) st = fs->Rename(tmp + "/m/global", dir + "/" + s.file);
    if (!st.ok()) {
      std::fprintf(stderr, "%s: %s\n", s.file, st.ToString().c_str());
      return 1;
    }
  }
  (void)fs->RemoveDir(tmp + "/m");
  (void)fs->RemoveDir(tmp);
  const std::string v1 = "cairn-global 1\nranks 4\ncommitted 3\npersistent 2\nranks_per_node 2\n";
  FILE* f = std::fopen((dir + "/v1-text").c_str(), "w");
  if (f == nullptr || std::fwrite(v1.data(), 1, v1.size(), f) != v1.size() || std::fclose(f) != 0) {
    std::fprintf(stderr, "v1-text: cannot write\n");
    return 1;
  }
  return 0;
}

// Writes one seed file of a binary corpus; false (said on stderr) if it cannot.
bool WriteSeed(const std::string& dir, const char* file, const std::vector<uint8_t>& bytes) {
  FILE* f = std::fopen((dir + "/" + file).c_str(), "wb");
  if (f == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() ||
      std::fclose(f) != 0) {
    std::fprintf(stderr, "%s: cannot write\n", file);
    return false;
  }
  return true;
}

// fuzz_partner_head's seeds: one head of each kind, as a source writes it.
int PartnerHeads(const std::string& dir) {
  using cairn::partner::Head;
  const struct {
    const char* file;
    Head head;
  } seeds[] = {
      {"files",
       {.kind = Head::Kind::kFiles,
        .version = 9,
        .name = "state",
        .total = 12288,
        .files = {{.number = 9, .bytes = 4096}, {.number = 8, .bytes = 8192}}}},
      {"nothing", {.kind = Head::Kind::kNothing, .version = 3, .name = "field.u"}},
      {"bye", {.kind = Head::Kind::kBye, .version = -2}},
  };
  for (const auto& s : seeds) {
    if (!WriteSeed(dir, s.file, cairn::partner::EncodeHead(s.head))) return 1;
  }
  return 0;
}

// fuzz_partner_messages' seeds: a chunk, a stored and a failed answer, an
// abort notice, as ranks write them (the first byte chooses the kind).
int PartnerMessages(const std::string& dir) {
  auto words = [](uint8_t kind, const std::array<int64_t, 2>& w) {
    std::vector<uint8_t> out{kind};
    const auto* p = reinterpret_cast<const uint8_t*>(w.data());
    out.insert(out.end(), p, p + sizeof w);
    return out;
  };
  std::vector<uint8_t> chunk(1 + 300 + cairn::partner::kTrailer, 0);
  for (size_t i = 1; i <= 300; ++i) chunk[i] = static_cast<uint8_t>(i * 13);
  cairn::partner::PutTrailer(chunk.data() + 1, 300, 0);
  return WriteSeed(dir, "chunk", chunk) &&
                 WriteSeed(dir, "answer-stored",
                           words(1, cairn::partner::EncodeAnswer(7, cairn::Code::kOk))) &&
                 WriteSeed(dir, "answer-failed",
                           words(1, cairn::partner::EncodeAnswer(7, cairn::Code::kNoSpace))) &&
                 WriteSeed(dir, "abort", words(2, cairn::partner::EncodeAbort(cairn::Code::kIo)))
             ? 0
             : 1;
}

// fuzz_parity_header's seeds: whole parity files (header, parity rows, CRC)
// of sets of 2, 3 and 4 members, one with empty bundles, one Reed-Solomon.
int ParityHeaders(const std::string& dir) {
  using cairn::parity::impl::Header;
  const struct {
    const char* file;
    Header header;
  } seeds[] = {
      {"two", {.version = 5, .position = 0, .chunk = 300, .members = {{0, 300, 11}, {1, 120, 12}}}},
      {"three",
       {.version = 40,
        .position = 2,
        .chunk = 256,
        .members = {{2, 512, 1}, {6, 500, 2}, {10, 3, 3}}}},
      {"four-empty",
       {.version = 0,
        .position = 3,
        .chunk = 1,
        .members = {{0, 0, 0}, {1, 0, 0}, {2, 0, 0}, {3, 0, 0}}}},
      {"four-rs",  // Reed-Solomon, two parity rows of 200 bytes
       {.code = cairn::L3Code::kRs,
        .parity = 2,
        .version = 9,
        .position = 1,
        .chunk = 200,
        .members = {{0, 400, 5}, {1, 100, 6}, {2, 0, 0}, {3, 399, 7}}}},
  };
  for (const auto& s : seeds) {
    std::vector<uint8_t> bytes = cairn::parity::impl::EncodeHeader(s.header);
    for (uint64_t i = 0; i < s.header.ParityBytes(); ++i) bytes.push_back(static_cast<uint8_t>(i * 7 + 1));
    const uint32_t crc = cairn::crc32c::Value(bytes.data(), bytes.size());
    for (int k = 0; k < 4; ++k) bytes.push_back(static_cast<uint8_t>(crc >> (8 * k)));
    if (!WriteSeed(dir, s.file, bytes)) return 1;
  }
  return 0;
}

// fuzz_bundle's seeds: the piece-size byte, then a bundle as a rank sends
// one (docs/format.md 3.9): a version of one file, and a chain of three
// files newest first (one of them empty).
int Bundles(const std::string& dir) {
  auto bundle = [](uint8_t piece, const std::vector<std::pair<int64_t, size_t>>& files) {
    std::vector<uint8_t> out{piece};
    cairn::redundancy::Put(&out, static_cast<int64_t>(files.size()));
    for (const auto& [number, bytes] : files) {
      cairn::redundancy::Put(&out, number);
      cairn::redundancy::Put(&out, static_cast<int64_t>(bytes));
      for (size_t i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(number * 31 + i));
    }
    return out;
  };
  return WriteSeed(dir, "one-file", bundle(0, {{4, 300}})) &&
                 WriteSeed(dir, "chain", bundle(6, {{12, 200}, {11, 0}, {9, 500}})) &&
                 WriteSeed(dir, "chain-whole", bundle(63, {{3, 64}, {0, 100}}))
             ? 0
             : 1;
}

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[2]) == "manifest") return Manifests(argv[1]);
  if (argc == 3 && std::string(argv[2]) == "partner_head") return PartnerHeads(argv[1]);
  if (argc == 3 && std::string(argv[2]) == "parity_header") return ParityHeaders(argv[1]);
  if (argc == 3 && std::string(argv[2]) == "partner_messages") return PartnerMessages(argv[1]);
  if (argc == 3 && std::string(argv[2]) == "bundle") return Bundles(argv[1]);
  if (argc != 2) {
    std::fprintf(stderr,
                 "usage: %s DIR [manifest|partner_head|partner_messages|parity_header|bundle]\n",
                 argv[0]);
    return 2;
  }
  const Seed seeds[] = {
      {"checkpoint-3-regions", EntryKind::kCheckpoint, "state", 3,
       {{0, MemoryKind::kHost, 100}, {1, MemoryKind::kHost, 0}, {7, MemoryKind::kHost, 6000}}},
      {"checkpoint-empty-region", EntryKind::kCheckpoint, "e", 0, {{0, MemoryKind::kHost, 0}}},
      {"checkpoint-3-blocks", EntryKind::kCheckpoint, "field.u", 12,
       {{-5, MemoryKind::kDevice, 3 * 4096}}},
      {"history-step", EntryKind::kHistoryStep, "wavefield", 41,
       {{2, MemoryKind::kManaged, 4097}, {3, MemoryKind::kHost, 1}}},
      {"v2-full", EntryKind::kCheckpoint, "state", 4,
       {{0, MemoryKind::kHost, 100}, {1, MemoryKind::kHost, 0}, {7, MemoryKind::kHost, 6000}},
       true, {}, {.content_id = 0x1111}},
      {"v2-layered", EntryKind::kCheckpoint, "state", 5,
       {{0, MemoryKind::kHost, 100}, {1, MemoryKind::kHost, 0}, {7, MemoryKind::kHost, 6000}},
       true, {{{10, 20}}, {}, {{0, 100}, {4096, 1904}}},
       {.content_id = 0x2222, .base_version = 4, .base_content_id = 0x1111, .depth = 1}},
  };
  for (const Seed& s : seeds) {
    if (Status st = Write(argv[1], s); !st.ok()) {
      std::fprintf(stderr, "%s: %s\n", s.file, st.ToString().c_str());
      return 1;
    }
  }
  return 0;
}
