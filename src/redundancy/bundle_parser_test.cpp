// A bundle parsed as it arrives (bundle_parser.hpp): cut anywhere, it
// hands on the same heads and contents in order; every malformed bundle of
// docs/format.md 3.9 is kCorrupt naming the sender, and stays so.
#include "redundancy/bundle_parser.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "redundancy/redundancy.hpp"

namespace cairn {
namespace {

using redundancy::BundleParser;
using redundancy::Put;

struct File {
  int64_t number;
  std::vector<uint8_t> bytes;
};

std::vector<uint8_t> Encode(const std::vector<File>& files, int64_t count) {
  std::vector<uint8_t> out;
  Put(&out, count);
  for (const File& f : files) {
    Put(&out, f.number);
    Put(&out, static_cast<int64_t>(f.bytes.size()));
    out.insert(out.end(), f.bytes.begin(), f.bytes.end());
  }
  return out;
}
std::vector<uint8_t> Encode(const std::vector<File>& files) {
  return Encode(files, static_cast<int64_t>(files.size()));
}

// What the parser handed on, rebuilt as files.
class Collect final : public BundleParser::Events {
 public:
  Status File(int64_t number, uint64_t bytes) override {
    files.push_back({number, {}});
    files.back().bytes.reserve(bytes);
    sizes.push_back(bytes);
    return fail_file;
  }
  Status Content(const uint8_t* data, size_t n, uint64_t offset) override {
    EXPECT_GT(n, 0u);
    EXPECT_EQ(offset, files.back().bytes.size()) << "contents come in order";
    files.back().bytes.insert(files.back().bytes.end(), data, data + n);
    return Status::Ok();
  }
  std::vector<struct File> files;
  std::vector<uint64_t> sizes;
  Status fail_file;
};

// Parses `in` cut into pieces of `piece` bytes (the last one shorter).
Status Parse(const std::vector<uint8_t>& in, size_t piece, Collect& out, uint64_t total) {
  BundleParser p("rank 3", total);
  for (size_t at = 0; at < in.size(); at += piece) {
    CAIRN_RETURN_IF_ERROR(p.Append(in.data() + at, std::min(piece, in.size() - at), out));
  }
  return p.Finish();
}
Status Parse(const std::vector<uint8_t>& in, size_t piece = 1) {
  Collect out;
  return Parse(in, piece, out, in.size());
}

std::vector<uint8_t> Bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + 7 * i);
  return b;
}

TEST(BundleParserTest, AnyCutGivesTheSameFilesInOrder) {
  const std::vector<File> chain = {
      {9, Bytes(1000, 1)}, {7, {}}, {3, Bytes(37, 2)}, {0, Bytes(5000, 3)}};
  const std::vector<uint8_t> in = Encode(chain);
  for (size_t piece :
       {size_t{1}, size_t{7}, size_t{8}, size_t{16}, size_t{23}, size_t{4096}, in.size()}) {
    Collect out;
    ASSERT_TRUE(Parse(in, piece, out, in.size()).ok()) << piece;
    ASSERT_EQ(out.files.size(), chain.size()) << piece;
    for (size_t i = 0; i < chain.size(); ++i) {
      EXPECT_EQ(out.files[i].number, chain[i].number);
      EXPECT_EQ(out.sizes[i], chain[i].bytes.size());
      EXPECT_EQ(out.files[i].bytes, chain[i].bytes) << "file " << i << ", pieces of " << piece;
    }
  }
  // Random cuts.
  std::mt19937 rng(5);
  for (int trial = 0; trial < 50; ++trial) {
    BundleParser p("rank 3", in.size());
    Collect out;
    for (size_t at = 0; at < in.size();) {
      const size_t n = std::min<size_t>(in.size() - at, 1 + rng() % 40);
      ASSERT_TRUE(p.Append(in.data() + at, n, out).ok());
      at += n;
    }
    ASSERT_TRUE(p.Finish().ok());
    EXPECT_EQ(out.files.back().bytes, chain.back().bytes);
  }
}

TEST(BundleParserTest, MalformedBundlesAreCorruptNamingTheSender) {
  const std::vector<File> two = {{5, Bytes(100, 1)}, {2, Bytes(50, 2)}};
  std::vector<std::pair<std::string, std::vector<uint8_t>>> bad;
  bad.push_back({"no file", Encode({}, 0)});
  bad.push_back({"negative count", Encode({}, -4)});
  bad.push_back({"a count its bytes cannot hold", Encode(two, int64_t{1} << 60)});
  bad.push_back({"one file more than it holds", Encode(two, 3)});
  bad.push_back({"a negative number", Encode({{-1, Bytes(8, 1)}})});
  bad.push_back({"not newest first", Encode({{2, Bytes(8, 1)}, {5, Bytes(8, 1)}})});
  bad.push_back({"a repeated number", Encode({{4, Bytes(8, 1)}, {4, Bytes(8, 1)}})});
  bad.push_back({"bytes after the last file", Encode(two, 1)});
  std::vector<uint8_t> negative_size = Encode({{1, {}}});
  const int64_t minus = -8;
  std::memcpy(negative_size.data() + 16, &minus, 8);
  bad.push_back({"a negative size", negative_size});
  std::vector<uint8_t> truncated = Encode(two);
  truncated.resize(truncated.size() - 1);
  bad.push_back({"truncated", truncated});
  bad.push_back({"only part of the count", {1, 0, 0}});
  for (const auto& [what, in] : bad) {
    for (size_t piece : {size_t{1}, size_t{5}, in.size() + 1}) {
      const Status s = Parse(in, piece);
      EXPECT_EQ(s.code(), Code::kCorrupt) << what << ": " << s.ToString();
      EXPECT_NE(s.message().find("from rank 3"), std::string::npos) << what << ": " << s.ToString();
    }
  }
}

TEST(BundleParserTest, MoreThanAnnouncedOrLessIsCorruptAndTheErrorStays) {
  const std::vector<uint8_t> in = Encode({{1, Bytes(64, 1)}});
  Collect out;
  BundleParser shorter("rank 3", in.size() - 10);
  EXPECT_EQ(shorter.Append(in.data(), in.size(), out).code(), Code::kCorrupt);
  // After an error, even good bytes are refused, and Finish says the same.
  const Status first = shorter.Append(in.data(), 1, out);
  EXPECT_EQ(first.code(), Code::kCorrupt);
  EXPECT_EQ(shorter.Finish().ToString(), first.ToString());

  Collect out2;
  BundleParser longer("rank 3", in.size() + 10);
  ASSERT_TRUE(longer.Append(in.data(), in.size(), out2).ok());
  EXPECT_EQ(longer.Finish().code(), Code::kCorrupt)
      << "its last file ended before the announced size";
}

TEST(BundleParserTest, AnEventsErrorEndsTheParse) {
  const std::vector<uint8_t> in = Encode({{1, Bytes(64, 1)}});
  Collect out;
  out.fail_file = Status::NoSpace("disk full");
  BundleParser p("rank 3", in.size());
  EXPECT_EQ(p.Append(in.data(), in.size(), out).code(), Code::kNoSpace);
  EXPECT_EQ(p.Finish().code(), Code::kNoSpace);
  EXPECT_EQ(p.Append(in.data(), 1, out).code(), Code::kNoSpace);
}

}  // namespace
}  // namespace cairn
