// Reed-Solomon over GF(2^8) for the parity sets of mpi.l3_code = rs
// (docs/format.md 3.9 is normative): the Cauchy generator of Intel's ISA-L
// (gf_gen_cauchy1_matrix: k identity rows, then e rows 1 / (r xor i)), every
// k of whose m rows are invertible, so any k symbols of a stripe give back
// its data. Only this file's .cpp includes ISA-L; a build without it
// (CAIRN_WITH_ISAL=OFF, or libisal-dev missing) makes Create a kConfig
// error that names the library. Internal to libcairn.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cairn/status.hpp"

namespace cairn::parity::impl {

// Whether this build has the Reed-Solomon code (ISA-L).
bool HaveReedSolomon();

class ReedSolomon {
 public:
  // The code of k data and e parity symbols per stripe (1 <= k, 1 <= e,
  // k + e <= 255). kConfig without ISA-L.
  static Result<ReedSolomon> Create(size_t k, size_t e);

  // out = parity row t (0 .. e-1) of data[0 .. k), n bytes each.
  void EncodeRow(size_t t, const uint8_t* const* data, uint8_t* out, size_t n) const;

  // Computes data symbols from any k symbols of a stripe. Symbol ids: data
  // chunk i is i (0 .. k-1), parity row t is k + t.
  class Decoder {
   public:
    // out[w] = data symbol wanted[w] from have[0 .. k) (their bytes in[j],
    // n each), with the `have` and `wanted` given to MakeDecoder.
    void Apply(const uint8_t* const* in, uint8_t* const* out, size_t n) const;

   private:
    friend class ReedSolomon;
    size_t k_ = 0, rows_ = 0;
    std::vector<uint8_t> tables_;  // ISA-L's expanded tables of the rows
  };
  // The decoder of `wanted` data symbols from the k distinct symbols
  // `have`. kInvalidArgument when `have` is not k distinct ids < k + e.
  Result<Decoder> MakeDecoder(const std::vector<size_t>& have,
                              const std::vector<size_t>& wanted) const;

  size_t k() const { return k_; }
  size_t e() const { return e_; }

 private:
  size_t k_ = 0, e_ = 0;
  std::vector<uint8_t> matrix_;  // (k + e) x k generator
  std::vector<uint8_t> rows_;    // per parity row: its expanded tables (32 k bytes)
};

}  // namespace cairn::parity::impl
