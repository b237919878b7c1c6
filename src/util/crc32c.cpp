// CRC32C (Castagnoli polynomial, reflected: 0x82F63B78).
//
// Three implementations with identical results, the first the build and
// the CPU allow:
//
//  * Intel's ISA-L crc32_iscsi, in a build with ISA-L (CAIRN_WITH_ISAL).
//  * Portable: slicing-by-8 (eight 256-entry tables, one 64-bit word per step).
//  * x86-64 SSE4.2: the crc32 instruction has a latency of 3 cycles and a
//    throughput of 1 per cycle, so a single dependency chain runs at a third
//    of the possible speed. Following Mark Adler's crc32c.c, large buffers are
//    cut into three adjacent streams whose CRCs are computed in parallel and
//    then combined: crc(A || B) = shift(crc(A), |B|) ^ crc(B), where shift()
//    appends |B| zero bytes to A's CRC. The shift is linear over GF(2), so it
//    is four table look-ups with tables precomputed (at compile time) for the
//    two stream lengths used.
//
// The library is compiled without -msse4.2; the hardware function carries a
// target attribute and is selected at run time with __builtin_cpu_supports.
#include "util/crc32c.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#if CAIRN_HAVE_ISAL
#include <isa-l/crc.h>
#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CAIRN_CRC32C_X86 1
#include <nmmintrin.h>
#endif

namespace cairn::crc32c {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // reflected Castagnoli polynomial

// ---- Portable slicing-by-8 -------------------------------------------------

using Table8 = std::array<std::array<uint32_t, 256>, 8>;

constexpr Table8 MakeSlicingTables() {
  Table8 t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    t[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; ++i) {
    for (int k = 1; k < 8; ++k) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
  }
  return t;
}

constexpr Table8 kSlicing = MakeSlicingTables();

inline uint64_t LoadLe64(const unsigned char* p) {
  uint64_t w;
  std::memcpy(&w, p, sizeof w);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  w = __builtin_bswap64(w);
#endif
  return w;
}

uint32_t ExtendSlicing(uint32_t crc, const unsigned char* p, size_t n) {
  uint32_t c = ~crc;
  // Byte steps up to 8-byte alignment so that the word loads are aligned.
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    c = (c >> 8) ^ kSlicing[0][(c ^ *p++) & 0xff];
    --n;
  }
  while (n >= 8) {
    const uint64_t w = LoadLe64(p) ^ c;
    c = kSlicing[7][w & 0xff] ^ kSlicing[6][(w >> 8) & 0xff] ^ kSlicing[5][(w >> 16) & 0xff] ^
        kSlicing[4][(w >> 24) & 0xff] ^ kSlicing[3][(w >> 32) & 0xff] ^
        kSlicing[2][(w >> 40) & 0xff] ^ kSlicing[1][(w >> 48) & 0xff] ^ kSlicing[0][w >> 56];
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    c = (c >> 8) ^ kSlicing[0][(c ^ *p++) & 0xff];
    --n;
  }
  return ~c;
}

#if CAIRN_CRC32C_X86

// ---- Zero-append ("shift") operators over GF(2) ----------------------------
//
// A 32x32 bit matrix is stored as 32 columns; column k is the image of bit k.

using Matrix = std::array<uint32_t, 32>;

constexpr uint32_t MatrixTimes(const Matrix& m, uint32_t v) {
  uint32_t sum = 0;
  for (int k = 0; v != 0; ++k, v >>= 1) {
    if (v & 1) sum ^= m[k];
  }
  return sum;
}

constexpr Matrix MatrixSquare(const Matrix& m) {
  Matrix sq{};
  for (int k = 0; k < 32; ++k) sq[k] = MatrixTimes(m, m[k]);
  return sq;
}

// The operator that appends `len` zero bytes to a (raw, un-inverted) CRC.
// Precondition: len is a power of two (true for the stream lengths below).
constexpr Matrix ZerosOperator(size_t len) {
  Matrix op{};  // one zero bit
  op[0] = kPoly;
  for (int k = 1; k < 32; ++k) op[k] = 1u << (k - 1);
  for (int i = 0; i < 3; ++i) op = MatrixSquare(op);  // 8 zero bits = one byte
  for (size_t n = len; n > 1; n >>= 1) op = MatrixSquare(op);
  return op;
}

using ShiftTable = std::array<std::array<uint32_t, 256>, 4>;

constexpr ShiftTable MakeShiftTable(size_t len) {
  const Matrix op = ZerosOperator(len);
  ShiftTable t{};
  for (uint32_t i = 0; i < 256; ++i) {
    t[0][i] = MatrixTimes(op, i);
    t[1][i] = MatrixTimes(op, i << 8);
    t[2][i] = MatrixTimes(op, i << 16);
    t[3][i] = MatrixTimes(op, i << 24);
  }
  return t;
}

// Stream lengths: kLong for large buffers, kShort for the tail. Each must be
// a power of two and a multiple of 8.
constexpr size_t kLong = 8192;
constexpr size_t kShort = 256;
constexpr ShiftTable kShiftLong = MakeShiftTable(kLong);
constexpr ShiftTable kShiftShort = MakeShiftTable(kShort);

inline uint32_t Shift(const ShiftTable& t, uint32_t crc) {
  return t[0][crc & 0xff] ^ t[1][(crc >> 8) & 0xff] ^ t[2][(crc >> 16) & 0xff] ^ t[3][crc >> 24];
}

__attribute__((target("sse4.2"))) inline uint64_t Crc64(uint64_t crc, const unsigned char* p) {
  uint64_t w;
  std::memcpy(&w, p, sizeof w);
  return _mm_crc32_u64(crc, w);
}

// Runs three streams of `len` bytes each at p, p+len, p+2*len while at least
// 3*len bytes remain, folding them into crc0.
__attribute__((target("sse4.2"))) inline void ThreeStreams(uint64_t& crc0, const unsigned char*& p,
                                                           size_t& n, size_t len,
                                                           const ShiftTable& shift) {
  while (n >= 3 * len) {
    uint64_t crc1 = 0, crc2 = 0;
    const unsigned char* end = p + len;
    do {
      crc0 = Crc64(crc0, p);
      crc1 = Crc64(crc1, p + len);
      crc2 = Crc64(crc2, p + 2 * len);
      p += 8;
    } while (p < end);
    crc0 = Shift(shift, static_cast<uint32_t>(crc0)) ^ crc1;
    crc0 = Shift(shift, static_cast<uint32_t>(crc0)) ^ crc2;
    p += 2 * len;
    n -= 3 * len;
  }
}

__attribute__((target("sse4.2"))) uint32_t ExtendSse42(uint32_t crc, const unsigned char* p,
                                                        size_t n) {
  uint64_t c = ~crc;
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
    --n;
  }
  ThreeStreams(c, p, n, kLong, kShiftLong);
  ThreeStreams(c, p, n, kShort, kShiftShort);
  while (n >= 8) {
    c = Crc64(c, p);
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
    --n;
  }
  return ~static_cast<uint32_t>(c);
}

#endif  // CAIRN_CRC32C_X86

#if CAIRN_HAVE_ISAL
// ISA-L's crc32_iscsi (its own run-time dispatch: PCLMULQDQ folding where
// the CPU has it): 1.75x the three-stream SSE4.2 path above on this
// project's machine (cairn-crc-cost, docs/bench.md "CRC32C"). It takes and
// returns the register uninverted, and an int length.
uint32_t ExtendIsal(uint32_t crc, const unsigned char* p, size_t n) {
  constexpr size_t kMost = size_t{1} << 30;
  crc = ~crc;
  for (; n > 0;) {
    const size_t len = std::min(n, kMost);
    crc = crc32_iscsi(const_cast<unsigned char*>(p), static_cast<int>(len), crc);
    p += len;
    n -= len;
  }
  return ~crc;
}
#endif

using ExtendFn = uint32_t (*)(uint32_t, const unsigned char*, size_t);

// Cairn's own: SSE4.2 where the CPU has it, else slicing-by-8.
ExtendFn ChooseOwn() {
#if CAIRN_CRC32C_X86
  if (__builtin_cpu_supports("sse4.2")) return &ExtendSse42;
#endif
  return &ExtendSlicing;
}

ExtendFn Choose() {
#if CAIRN_HAVE_ISAL
  return &ExtendIsal;
#else
  return ChooseOwn();
#endif
}

// Chosen once; a function-local static is initialized thread-safely and is
// usable from other translation units' static initializers.
ExtendFn Impl() {
  static const ExtendFn fn = Choose();
  return fn;
}

}  // namespace

uint32_t Extend(uint32_t crc, const void* data, size_t n) {
  return Impl()(crc, static_cast<const unsigned char*>(data), n);
}

uint32_t ExtendOwn(uint32_t crc, const void* data, size_t n) {
  static const ExtendFn fn = ChooseOwn();
  return fn(crc, static_cast<const unsigned char*>(data), n);
}

uint32_t ExtendPortable(uint32_t crc, const void* data, size_t n) {
  return ExtendSlicing(crc, static_cast<const unsigned char*>(data), n);
}

namespace {

// a * b modulo the polynomial, in the reflected bit order (x^0 is the top bit).
uint32_t MultiplyModP(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (uint32_t bit = 1u << 31; bit != 0; bit >>= 1) {
    if (a & bit) product ^= b;
    b = (b & 1) ? (b >> 1) ^ kPoly : b >> 1;
  }
  return product;
}

// x^(8 n) modulo the polynomial: n zero bytes appended shift a CRC by it.
uint32_t ShiftOfBytes(uint64_t n) {
  uint32_t result = 1u << 31;  // x^0
  uint32_t power = 1u << 23;   // x^8: one byte
  for (; n != 0; n >>= 1) {
    if (n & 1) result = MultiplyModP(power, result);
    power = MultiplyModP(power, power);
  }
  return result;
}

}  // namespace

uint32_t Combine(uint32_t crc_a, uint32_t crc_b, uint64_t length_b) {
  // The pre- and post-inversions of A's and B's CRCs cancel (as in zlib).
  return MultiplyModP(ShiftOfBytes(length_b), crc_a) ^ crc_b;
}

bool IsHardwareAccelerated() { return Impl() != &ExtendSlicing; }

}  // namespace cairn::crc32c
