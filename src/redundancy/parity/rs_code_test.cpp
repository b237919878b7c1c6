// The stripes of a parity set (stripes.hpp) and the Reed-Solomon code
// (rs_code.hpp): every member holds e parity rows and k data chunks, each
// in a distinct stripe; the XOR layout is the case e = 1; any e lost
// symbols of a stripe come back from the other k. Skipped without ISA-L.
#include "redundancy/parity/rs_code.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

#include "redundancy/parity/stripes.hpp"
#include "redundancy/parity/xor_parity_impl.hpp"
#include "testing/test_util.hpp"

namespace cairn::parity::impl {
namespace {

TEST(StripesTest, EveryMemberHoldsOneSymbolOfEveryStripe) {
  for (size_t m = 2; m <= 9; ++m) {
    for (size_t e = 1; e < m; ++e) {
      const Stripes st{.m = m, .e = e};
      for (size_t s = 0; s < m; ++s) {
        std::set<size_t> ids;
        for (size_t j = 0; j < m; ++j) {
          const size_t id = st.Symbol(j, s);
          ids.insert(id);
          EXPECT_EQ(st.Holder(s, id), j) << m << " " << e << " " << s;
        }
        EXPECT_EQ(ids.size(), m);
      }
      for (size_t j = 0; j < m; ++j) {
        for (size_t t = 0; t < e; ++t) EXPECT_EQ(st.Row(j, st.StripeOfRow(j, t)), t);
        for (size_t i = 0; i < st.k(); ++i) {
          const size_t s = st.StripeOfChunk(j, i);
          EXPECT_FALSE(st.HoldsParity(j, s));
          EXPECT_EQ(st.Chunk(j, s), i);
        }
      }
    }
  }
}

TEST(StripesTest, OneParityRowIsTheXorLayout) {
  for (size_t m = 2; m <= 9; ++m) {
    const Stripes st{.m = m, .e = 1};
    for (size_t j = 0; j < m; ++j) {
      EXPECT_EQ(st.StripeOfRow(j, 0), j);
      for (size_t p = 0; p < m; ++p) {
        if (p == j) continue;
        EXPECT_EQ(st.Chunk(p, j), ChunkOf(j, p, m));
      }
    }
  }
}

class ReedSolomonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveReedSolomon()) GTEST_SKIP() << "built without ISA-L (CAIRN_WITH_ISAL)";
  }
};

// Every way of losing e symbols of one stripe of k + e, for a few shapes:
// the lost data symbols decode from the remaining k, byte for byte.
TEST_F(ReedSolomonTest, AnyESymbolsOfAStripeComeBack) {
  constexpr size_t kBytes = 1000;  // not a multiple of ISA-L's vector width
  for (auto [k, e] : {std::pair<size_t, size_t>{1, 1}, {2, 2}, {3, 2}, {4, 3}, {6, 2}}) {
    auto rs = ReedSolomon::Create(k, e);
    ASSERT_TRUE(rs.ok()) << rs.status().ToString();
    std::vector<std::vector<uint8_t>> sym(k + e, std::vector<uint8_t>(kBytes));
    std::vector<const uint8_t*> data;
    for (size_t i = 0; i < k; ++i) {
      test::FillSplitMix(sym[i].data(), kBytes, 3, i);
      data.push_back(sym[i].data());
    }
    for (size_t t = 0; t < e; ++t) rs->EncodeRow(t, data.data(), sym[k + t].data(), kBytes);
    // Each subset of k survivors (bitmask over k + e symbols).
    for (uint32_t mask = 0; mask < (1u << (k + e)); ++mask) {
      if (static_cast<size_t>(__builtin_popcount(mask)) != k) continue;
      std::vector<size_t> have, wanted;
      std::vector<const uint8_t*> in;
      for (size_t id = 0; id < k + e; ++id) {
        if (mask & (1u << id)) {
          have.push_back(id);
          in.push_back(sym[id].data());
        } else if (id < k) {
          wanted.push_back(id);
        }
      }
      auto decoder = rs->MakeDecoder(have, wanted);
      ASSERT_TRUE(decoder.ok()) << decoder.status().ToString();
      std::vector<std::vector<uint8_t>> got(wanted.size(), std::vector<uint8_t>(kBytes));
      std::vector<uint8_t*> out;
      for (auto& g : got) out.push_back(g.data());
      decoder->Apply(in.data(), out.data(), kBytes);
      for (size_t w = 0; w < wanted.size(); ++w)
        EXPECT_EQ(got[w], sym[wanted[w]]) << "k " << k << " e " << e << " mask " << mask;
    }
  }
}

TEST_F(ReedSolomonTest, BadShapesAreErrors) {
  EXPECT_EQ(ReedSolomon::Create(0, 2).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ReedSolomon::Create(200, 100).status().code(), Code::kInvalidArgument);
  auto rs = ReedSolomon::Create(3, 2);
  ASSERT_TRUE(rs.ok());
  EXPECT_FALSE(rs->MakeDecoder({0, 1}, {2}).ok());     // too few
  EXPECT_FALSE(rs->MakeDecoder({0, 0, 1}, {2}).ok());  // repeated
  EXPECT_FALSE(rs->MakeDecoder({0, 1, 5}, {2}).ok());  // no such symbol
  EXPECT_FALSE(rs->MakeDecoder({0, 1, 3}, {4}).ok());  // wants a parity row
}

}  // namespace
}  // namespace cairn::parity::impl
