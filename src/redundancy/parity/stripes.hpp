// The stripes of a parity set (docs/format.md 3.9 is normative): a set of
// m members, e parity rows (1 for XOR), k = m - e data chunks per member.
// Stripe s (0 .. m-1) has one symbol from every member: parity row t
// (0 .. e-1) from member (s + t) mod m, data chunk i (0 .. k-1) from member
// (s - i - 1) mod m. So every member holds e parity rows and k data chunks,
// each in another stripe, and losing any e members loses at most e symbols
// of each stripe. With e = 1 it is the XOR layout: member s holds stripe s's
// parity and member p's chunk in it is (s - p - 1) mod m.
#pragma once

#include <cstddef>

namespace cairn::parity::impl {

struct Stripes {
  size_t m = 0;  // members
  size_t e = 1;  // parity rows
  size_t k() const { return m - e; }
  // Whether member j holds a parity row of stripe s, and which.
  bool HoldsParity(size_t j, size_t s) const { return Row(j, s) < e; }
  size_t Row(size_t j, size_t s) const { return (j + m - s) % m; }
  // The data chunk of member j in stripe s (when !HoldsParity): also its
  // place among the stripe's data symbols.
  size_t Chunk(size_t j, size_t s) const { return (s + m - j - 1) % m; }
  // The stripe of member j's parity row t, and of its data chunk i.
  size_t StripeOfRow(size_t j, size_t t) const { return (j + m - t) % m; }
  size_t StripeOfChunk(size_t j, size_t i) const { return (j + i + 1) % m; }
  // The member that holds symbol `id` of stripe s: data chunk id < k, parity
  // row id - k.
  size_t Holder(size_t s, size_t id) const {
    return id < k() ? (s + 2 * m - id - 1) % m : (s + id - k()) % m;
  }
  // Member j's symbol id in stripe s.
  size_t Symbol(size_t j, size_t s) const {
    return HoldsParity(j, s) ? k() + Row(j, s) : Chunk(j, s);
  }
};

}  // namespace cairn::parity::impl
