// ParseBundleInput (fuzz/inputs.hpp): the bytes as a bundle arriving in
// pieces, parsed as a receiver parses one (redundancy::BundleParser).
#include <algorithm>
#include <cstring>
#include <vector>

#include "fuzz/inputs.hpp"
#include "redundancy/bundle_parser.hpp"

namespace cairn::fuzz {
namespace {

// Writes back what the parser hands on, as a sender would have sent it.
class Echo final : public redundancy::BundleParser::Events {
 public:
  explicit Echo(int64_t count) { Word(count); }
  Status File(int64_t number, uint64_t bytes) override {
    Word(number);
    Word(static_cast<int64_t>(bytes));
    return Status::Ok();
  }
  Status Content(const uint8_t* data, size_t n, uint64_t) override {
    out.insert(out.end(), data, data + n);
    return Status::Ok();
  }
  std::vector<uint8_t> out;

 private:
  void Word(int64_t v) {
    const size_t at = out.size();
    out.resize(at + sizeof v);
    std::memcpy(out.data() + at, &v, sizeof v);
  }
};

}  // namespace

Status ParseBundleInput(const uint8_t* data, size_t size) {
  if (size == 0) return Status::Corrupt("no piece size");
  const size_t piece = 1 + data[0] % 64;
  const uint8_t* bundle = data + 1;
  const size_t bytes = size - 1;
  int64_t count = 0;
  if (bytes >= sizeof count) std::memcpy(&count, bundle, sizeof count);
  Echo echo(count);
  redundancy::BundleParser parser("fuzz", bytes);
  for (size_t at = 0; at < bytes; at += piece) {
    CAIRN_RETURN_IF_ERROR(parser.Append(bundle + at, std::min(piece, bytes - at), echo));
  }
  CAIRN_RETURN_IF_ERROR(parser.Finish());
  return echo.out.size() == bytes && std::memcmp(echo.out.data(), bundle, bytes) == 0
             ? Status::Ok()
             : Status::Internal("an accepted bundle does not encode back to its bytes");
}

}  // namespace cairn::fuzz
