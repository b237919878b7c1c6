// format::Chain and ChainPlan: random layered chains up to depth 10 written
// with FileWriter and restored byte-exact (whole regions and windows), blocks
// hidden by newer layers not read, and every broken link named. On the real
// POSIX layer (ReadBlocks opens each file once per worker thread).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "format/chain.hpp"
#include "format/file_writer.hpp"
#include "format/naming.hpp"
#include "util/crc32c.hpp"

namespace cairn::format {
namespace {

namespace stdfs = std::filesystem;
using Bytes = std::vector<uint8_t>;
constexpr uint32_t kBlock = 8192;

std::vector<RegionSpec> Regions() {
  return {{1, MemoryKind::kHost, 100000}, {2, MemoryKind::kHost, 0}, {7, MemoryKind::kHost, 20001}};
}

// A zero-filled 4096-aligned buffer.
class Aligned {
 public:
  explicit Aligned(size_t n)
      : p_(static_cast<uint8_t*>(std::aligned_alloc(4096, std::max<size_t>(n, 4096)))) {
    std::memset(p_, 0, std::max<size_t>(n, 4096));
  }
  ~Aligned() { std::free(p_); }
  Aligned(const Aligned&) = delete;
  Aligned& operator=(const Aligned&) = delete;
  uint8_t* data() { return p_; }

 private:
  uint8_t* p_;
};

class ChainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "cairn_chain_test.XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(tmpl.data()));
    dir_ = tmpl;
    ASSERT_TRUE(fs_->CreateDirs(dir_ + "/run", 0700).ok());
  }
  void TearDown() override {
    if (getenv("KEEP_CHAIN_DIR") == nullptr) stdfs::remove_all(dir_);
  }

  std::string Path(int64_t v) const { return EntryPath(dir_, "run", EntryKind::kCheckpoint, v); }

  // Writes version v storing `extents` of `content`; records its content id.
  void Write(int64_t v, const std::vector<RegionSpec>& specs, const std::vector<Bytes>& content,
             const std::vector<ExtentList>& extents, VersionRecord rec) {
    const Layout l = Layout::MakeV2(specs, extents, kBlock, rec);
    FileInfo info;
    info.name = "run";
    info.number = v;
    auto w = FileWriter::Create(fs_, Path(v), info, l, WriterOptions{.direct = true});
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    for (uint32_t r = 0; r < l.regions.size(); ++r) {
      Bytes packed;
      for (const Extent& e : extents[r]) {
        packed.insert(packed.end(), content[r].begin() + e.offset, content[r].begin() + e.end());
      }
      // Direct writes need aligned sources, zero past the payload (FileWriter).
      Aligned buf(AlignUp(packed.size()));
      std::copy(packed.begin(), packed.end(), buf.data());
      for (uint32_t j = 0; j < l.regions[r].block_count; ++j) {
        const uint32_t index = l.regions[r].first_block + j;
        const uint8_t* p = buf.data() + uint64_t{j} * kBlock;
        ASSERT_TRUE((*w)->WriteBlock(index, p, crc32c::Value(p, l.blocks[index].length)).ok());
      }
    }
    ids_[v] = (*w)->content_id();
    ASSERT_TRUE((*w)->Commit().ok());
  }
  void WriteFull(int64_t v, const std::vector<Bytes>& content) {
    Write(v, Regions(), content, Layout::FullExtents(Regions()), VersionRecord{});
  }
  VersionRecord On(int64_t base, uint32_t depth) { return VersionRecord{0, base, ids_[base], depth}; }

  Status Restore(int64_t v, std::vector<Bytes>* out, const ReadBlocksOptions& o = {}) {
    CAIRN_ASSIGN_OR_RETURN(Chain chain, Chain::Open(fs_, dir_, "run", v));
    std::vector<RegionTarget> targets;
    out->clear();
    for (const RegionSpec& s : Regions()) out->emplace_back(s.bytes, 0xee);
    for (size_t r = 0; r < out->size(); ++r) targets.push_back({Regions()[r].id, (*out)[r].data()});
    return RestoreChain(fs_, chain, targets, {}, o);
  }

  os::FileSystem* fs_ = os::FileSystem::Default();
  std::string dir_;
  std::map<int64_t, uint64_t> ids_;
};

// Random changes to `content`: runs, single bytes, nothing, or everything.
std::vector<ExtentList> Change(std::vector<Bytes>& content, std::mt19937_64& rng) {
  std::vector<ExtentList> out(content.size());
  for (size_t r = 0; r < content.size(); ++r) {
    const uint64_t size = content[r].size();
    if (size == 0) continue;
    std::vector<Extent> runs;
    const int mode = static_cast<int>(rng() % 6);
    if (mode == 0) runs.push_back({0, size});
    for (int n = mode == 1 ? 0 : static_cast<int>(rng() % 6); n > 0; --n) {
      const uint64_t off = rng() % size;
      runs.push_back({off, std::min<uint64_t>(size - off, 1 + rng() % (rng() % 2 ? 16 : 30000))});
    }
    std::sort(runs.begin(), runs.end(), [](auto& a, auto& b) { return a.offset < b.offset; });
    for (const Extent& e : runs) {
      for (uint64_t i = e.offset; i < e.end(); ++i) content[r][i] = static_cast<uint8_t>(rng());
      AppendExtent(out[r], e.offset, e.bytes);
    }
  }
  return out;
}

TEST_F(ChainTest, RandomChainsUpToDepthTenRestoreByteExact) {
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    std::mt19937_64 rng(seed);
    std::vector<std::vector<Bytes>> versions(1);
    for (const RegionSpec& s : Regions()) {
      Bytes b(s.bytes);
      for (auto& x : b) x = static_cast<uint8_t>(rng());
      versions[0].push_back(b);
    }
    const int64_t first = static_cast<int64_t>(seed * 100);
    WriteFull(first, versions[0]);
    for (uint32_t depth = 1; depth <= 10; ++depth) {
      std::vector<Bytes> next = versions.back();
      const auto extents = Change(next, rng);
      Write(first + depth, Regions(), next, extents, On(first + depth - 1, depth));
      versions.push_back(std::move(next));
    }
    for (uint32_t depth = 0; depth <= 10; ++depth) {
      std::vector<Bytes> got;
      ReadBlocksOptions o;
      o.queue_depth = 1 + depth % 4;
      o.direct = depth % 2 == 0;
      ASSERT_TRUE(Restore(first + depth, &got, o).ok()) << "seed " << seed << " depth " << depth;
      ASSERT_EQ(versions[depth], got) << "seed " << seed << " depth " << depth;
      // A window of region id 1.
      auto chain = Chain::Open(fs_, dir_, "run", first + depth);
      ASSERT_TRUE(chain.ok());
      EXPECT_EQ(depth, chain->depth());
      const uint64_t off = rng() % 100000, n = rng() % (100000 - off + 1);
      Bytes window(n);
      const RegionTarget t{1, window.data(), true, off, n};
      ASSERT_TRUE(RestoreChain(fs_, *chain, {&t, 1}).ok());
      ASSERT_TRUE(std::equal(window.begin(), window.end(), versions[depth][0].begin() + off));
      Status v = chain->VerifyAll();
      EXPECT_TRUE(v.ok()) << v.ToString();
    }
  }
}

TEST_F(ChainTest, HiddenBlocksAreNotRead) {
  std::vector<Bytes> c(3);
  for (size_t r = 0; r < 3; ++r) c[r].assign(Regions()[r].bytes, static_cast<uint8_t>(r + 1));
  WriteFull(1, c);
  for (auto& b : c) std::fill(b.begin(), b.end(), 9);
  Write(2, Regions(), c, Layout::FullExtents(Regions()), On(1, 1));  // rewrites everything
  c[0][50000] = 4;
  Write(3, Regions(), c, {{{50000, 1}}, {}, {}}, On(2, 2));
  auto chain = Chain::Open(fs_, dir_, "run", 3);
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  std::vector<Bytes> got(3);
  std::vector<RegionTarget> t;
  for (size_t r = 0; r < 3; ++r) {
    got[r].resize(c[r].size());
    t.push_back({Regions()[r].id, got[r].data()});
  }
  auto plan = ChainPlan::Make(*chain, t);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ((std::vector<uint64_t>{1, 120001, 0}), plan->read_bytes());
  ASSERT_TRUE(plan->Execute(fs_, {}).ok());
  EXPECT_EQ(c, got);
}

TEST_F(ChainTest, BrokenLinksAreNamed) {
  std::vector<Bytes> c(3);
  for (size_t r = 0; r < 3; ++r) c[r].assign(Regions()[r].bytes, 5);
  WriteFull(4, c);
  Write(5, Regions(), c, {{{10, 10}}, {}, {}}, On(4, 1));
  Write(6, Regions(), c, {{{30, 10}}, {}, {}}, On(5, 2));
  std::vector<Bytes> got;
  ASSERT_TRUE(Restore(6, &got).ok());

  // A damaged block of the base: Open passes, the restore and verify fail.
  {
    const std::string p = Path(4);
    FILE* f = std::fopen(p.c_str(), "r+b");
    ASSERT_NE(nullptr, f);
    std::fseek(f, 4096 + 20000, SEEK_SET);
    std::fputc(0x77, f);
    std::fclose(f);
    Status s = Restore(6, &got);
    EXPECT_EQ(Code::kCorrupt, s.code());
    EXPECT_NE(std::string::npos, s.message().find(p + ": block 2 (region id 1")) << s.message();
    auto chain = Chain::Open(fs_, dir_, "run", 6);
    ASSERT_TRUE(chain.ok());
    s = chain->VerifyAll();
    EXPECT_EQ(0u, s.message().rfind(Path(6) + ": v5 -> base v4: " + p + ": block 2", 0))
        << s.message();
    WriteFull(4, c);  // a new version 4: another content id
  }
  Status s = Restore(6, &got);
  EXPECT_EQ(Code::kCorrupt, s.code());
  EXPECT_EQ(0u, s.message().rfind(Path(5) + ": v5 -> base v4: content id 0x", 0)) << s.message();
  EXPECT_NE(std::string::npos, s.message().find("(a different version 4)"));

  ASSERT_TRUE(fs_->Remove(Path(4)).ok());
  s = Restore(6, &got);
  EXPECT_EQ(Code::kNotFound, s.code());
  EXPECT_EQ(Path(5) + ": v5 -> base v4: missing (" + Path(4) + ")", s.message());

  // Region set mismatch, depth mismatch, and a version-1 base.
  WriteFull(10, c);
  auto other = Regions();
  other[2].bytes = 20000;
  std::vector<Bytes> oc = c;
  oc[2].resize(20000);
  Write(11, other, oc, {{}, {}, {}}, On(10, 1));
  s = Restore(11, &got);
  EXPECT_EQ(Path(11) + ": v11 -> base v10: region id 7 is 20000 bytes here, 20001 in the base",
            s.message());
  Write(12, Regions(), c, {{}, {}, {}}, On(10, 3));  // depth an upper bound: valid
  EXPECT_TRUE(Restore(12, &got).ok());
  Write(13, Regions(), c, {{}, {}, {}}, On(12, 3));
  EXPECT_NE(std::string::npos,
            Restore(13, &got).message().find("depth 3 here is not above the base's 3"));
  {
    FileInfo info;
    info.name = "run";
    info.number = 20;
    const Layout l = Layout::Make(Regions(), kBlock);
    auto w = FileWriter::Create(fs_, Path(20), info, l, WriterOptions{});
    ASSERT_TRUE(w.ok());
    for (uint32_t i = 0; i < l.blocks.size(); ++i) {
      Bytes b(kBlock, 5);
      ASSERT_TRUE((*w)->WriteBlock(i, b.data(), crc32c::Value(b.data(), l.blocks[i].length)).ok());
    }
    ASSERT_TRUE((*w)->Commit().ok());
    // A version-1 file is a chain of one link.
    Status s20 = Restore(20, &got);
    ASSERT_TRUE(s20.ok()) << s20.ToString();
    EXPECT_EQ(c, got);
  }
  ids_[20] = 77;
  Write(21, Regions(), c, {{}, {}, {}}, On(20, 1));
  EXPECT_NE(std::string::npos, Restore(21, &got).message().find("format version 1 file"));
}

TEST_F(ChainTest, ACopyKeepsTheContentIdSoTheChainResolvesElsewhere) {
  // As the mover copies a file to the persistent tier: same layout, same
  // blocks. The writer keeps a non-zero content id, so references hold.
  std::vector<Bytes> c(3);
  for (size_t r = 0; r < 3; ++r) c[r].assign(Regions()[r].bytes, 3);
  WriteFull(1, c);
  c[0][99] = 8;
  Write(2, Regions(), c, {{{99, 1}}, {}, {}}, On(1, 1));
  const std::string other = dir_ + "/copy";
  ASSERT_TRUE(fs_->CreateDirs(other + "/run", 0700).ok());
  for (int64_t v : {1, 2}) {
    auto r = FileReader::Open(fs_, Path(v));
    ASSERT_TRUE(r.ok());
    auto w = FileWriter::Create(fs_, EntryPath(other, "run", EntryKind::kCheckpoint, v),
                                (*r)->info(), (*r)->layout(), WriterOptions{});
    ASSERT_TRUE(w.ok());
    EXPECT_EQ(ids_[v], (*w)->content_id());
    Aligned buf(kBlock);
    for (uint32_t b = 0; b < (*r)->layout().blocks.size(); ++b) {
      ASSERT_TRUE((*r)->ReadBlock(b, buf.data()).ok());
      ASSERT_TRUE((*w)->WriteBlock(b, buf.data(), (*r)->block_crc(b)).ok());
    }
    ASSERT_TRUE((*w)->Commit().ok());
  }
  auto chain = Chain::Open(fs_, other, "run", 2);
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  std::vector<Bytes> got(3);
  std::vector<RegionTarget> t;
  for (size_t r = 0; r < 3; ++r) {
    got[r].resize(c[r].size());
    t.push_back({Regions()[r].id, got[r].data()});
  }
  ASSERT_TRUE(RestoreChain(fs_, *chain, t).ok());
  EXPECT_EQ(c, got);
}

}  // namespace
}  // namespace cairn::format
