// Reed-Solomon through ISA-L (rs_code.hpp; docs/format.md 3.9).
#include "redundancy/parity/rs_code.hpp"

#include <algorithm>
#include <string>

#if CAIRN_HAVE_ISAL
#include <isa-l/erasure_code.h>
#endif

namespace cairn::parity::impl {

#if CAIRN_HAVE_ISAL

bool HaveReedSolomon() { return true; }

Result<ReedSolomon> ReedSolomon::Create(size_t k, size_t e) {
  if (k < 1 || e < 1 || k + e > 255)
    return Status::InvalidArgument("a Reed-Solomon code of " + std::to_string(k) + " data and " +
                                   std::to_string(e) +
                                   " parity symbols (1 <= each, at most 255 in all)");
  ReedSolomon rs;
  rs.k_ = k;
  rs.e_ = e;
  rs.matrix_.resize((k + e) * k);
  gf_gen_cauchy1_matrix(rs.matrix_.data(), static_cast<int>(k + e), static_cast<int>(k));
  rs.rows_.resize(e * 32 * k);
  for (size_t t = 0; t < e; ++t)
    ec_init_tables(static_cast<int>(k), 1, &rs.matrix_[(k + t) * k], &rs.rows_[t * 32 * k]);
  return rs;
}

void ReedSolomon::EncodeRow(size_t t, const uint8_t* const* data, uint8_t* out, size_t n) const {
  // ISA-L takes non-const pointers; it only reads the sources and the tables.
  uint8_t* outs[1] = {out};
  ec_encode_data(static_cast<int>(n), static_cast<int>(k_), 1,
                 const_cast<uint8_t*>(&rows_[t * 32 * k_]), const_cast<uint8_t**>(data), outs);
}

Result<ReedSolomon::Decoder> ReedSolomon::MakeDecoder(const std::vector<size_t>& have,
                                                      const std::vector<size_t>& wanted) const {
  std::vector<size_t> sorted = have;
  std::sort(sorted.begin(), sorted.end());
  if (have.size() != k_ || std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end() ||
      (!sorted.empty() && sorted.back() >= k_ + e_))
    return Status::InvalidArgument("a Reed-Solomon decoding needs " + std::to_string(k_) +
                                   " distinct symbols of its stripe");
  // The generator's rows of the symbols at hand map the data onto them; its
  // inverse maps them back, and the wanted data symbols are its rows.
  std::vector<uint8_t> sub(k_ * k_), inverse(k_ * k_), rows;
  for (size_t j = 0; j < k_; ++j) std::copy_n(&matrix_[have[j] * k_], k_, &sub[j * k_]);
  if (gf_invert_matrix(sub.data(), inverse.data(), static_cast<int>(k_)) != 0)
    return Status::Internal(
        "a Reed-Solomon submatrix is singular (the Cauchy generator's never are)");
  for (size_t w : wanted) {
    if (w >= k_) return Status::InvalidArgument("a Reed-Solomon decoding wants data symbols only");
    rows.insert(rows.end(), &inverse[w * k_], &inverse[w * k_] + k_);
  }
  Decoder d;
  d.k_ = k_;
  d.rows_ = wanted.size();
  d.tables_.resize(32 * k_ * std::max<size_t>(1, wanted.size()));
  if (!wanted.empty())
    ec_init_tables(static_cast<int>(k_), static_cast<int>(wanted.size()), rows.data(),
                   d.tables_.data());
  return d;
}

void ReedSolomon::Decoder::Apply(const uint8_t* const* in, uint8_t* const* out, size_t n) const {
  if (rows_ == 0 || n == 0) return;
  ec_encode_data(static_cast<int>(n), static_cast<int>(k_), static_cast<int>(rows_),
                 const_cast<uint8_t*>(tables_.data()), const_cast<uint8_t**>(in),
                 const_cast<uint8_t**>(out));
}

#else  // !CAIRN_HAVE_ISAL

bool HaveReedSolomon() { return false; }

Result<ReedSolomon> ReedSolomon::Create(size_t, size_t) {
  return Status::Config(
      "mpi.l3_code = rs needs Intel's ISA-L, which this build of Cairn lacks (install Debian's "
      "libisal-dev "
      "and configure again; CAIRN_WITH_ISAL)");
}
void ReedSolomon::EncodeRow(size_t, const uint8_t* const*, uint8_t*, size_t) const {}
Result<ReedSolomon::Decoder> ReedSolomon::MakeDecoder(const std::vector<size_t>&,
                                                      const std::vector<size_t>&) const {
  return Create(0, 0).status();
}
void ReedSolomon::Decoder::Apply(const uint8_t* const*, uint8_t* const*, size_t) const {}

#endif

}  // namespace cairn::parity::impl
