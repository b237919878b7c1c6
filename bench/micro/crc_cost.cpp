// cairn-crc-cost: Cairn's own CRC32C (util/crc32c's ExtendOwn: three
// interleaved SSE4.2 streams) against ISA-L's crc32_iscsi, which a build
// with ISA-L uses instead (crc32c::Extend):
//
//   cairn-crc-cost [MiB, 256] [repeats, 9]
//
// Both run over the same cached buffer (touched first, so no page fault is
// timed), alternating which goes first each repeat; prints, as one JSON
// line, each one's median GB/s and ISA-L's time / Cairn's. The two results
// are checked equal (ISA-L's takes and returns the CRC uninverted).
#include <isa-l/crc.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "common/timing.hpp"
#include "util/crc32c.hpp"

int main(int argc, char** argv) {
  using cairn::bench::Clock;
  using cairn::bench::Median;
  using cairn::bench::Since;
  const size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 256;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 9;
  if (mib == 0 || repeats <= 0) {
    std::fprintf(stderr, "usage: %s [MiB] [repeats]\n", argv[0]);
    return 2;
  }
  std::vector<unsigned char> buf(mib << 20);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<unsigned char>(i * 2654435761u >> 13);
  std::vector<double> cairn_s, isal_s;
  uint32_t a = 0, b = 0;
  for (int r = 0; r < repeats; ++r) {
    for (int k = 0; k < 2; ++k) {
      const bool cairn_first = (r + k) % 2 == 0;
      const auto t = Clock::now();
      if (cairn_first) {
        a = cairn::crc32c::ExtendOwn(0, buf.data(), buf.size());
        cairn_s.push_back(Since(t));
      } else {
        b = ~crc32_iscsi(buf.data(), static_cast<int>(buf.size()), 0xffffffffu);
        isal_s.push_back(Since(t));
      }
    }
  }
  if (a != b) {
    std::fprintf(stderr, "cairn-crc-cost: the CRCs differ (%08x, %08x)\n", a, b);
    return 1;
  }
  const double gb = static_cast<double>(buf.size()) / 1e9, c = Median(cairn_s), i = Median(isal_s);
  std::printf("{\"bytes\": %zu, \"repeats\": %d, \"cairn_gbps\": %.2f, \"isal_gbps\": %.2f, \"isal_vs_cairn\": %.3f}\n",
              buf.size(), repeats, gb / c, gb / i, i / c);
  return 0;
}
