// The C++ consumer of the install test (tests/install_test.sh): checkpoint a
// vector through cairn::Client, lose it, restore it, compare. The scratch
// directory comes from CAIRN_SCRATCH (the install test sets it). Exit 0 on
// success.
#include <cairn/cairn.hpp>

#include <cstdio>
#include <vector>

int main() {
  auto opened = cairn::Client::Open(static_cast<const char*>(nullptr));
  if (!opened.ok()) {
    std::fprintf(stderr, "consumer_cpp: open: %s\n", opened.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<cairn::Client> client = std::move(opened).value();
  std::vector<double> field(100000);
  for (size_t i = 0; i < field.size(); ++i) field[i] = 0.5 * static_cast<double>(i);
  cairn::Status s = client->Protect(0, field.data(), field.size() * sizeof(double));
  if (s.ok()) s = client->Checkpoint("consumer_cpp", 7);
  if (s.ok()) s = client->Wait("consumer_cpp", 7, cairn::Level::kLocal);
  std::vector<double> expect = field;
  field.assign(field.size(), 0.0);
  auto v = s.ok() ? client->RestoreLatest("consumer_cpp") : cairn::Result<int64_t>(s);
  if (!v.ok() || *v != 7 || field != expect) {
    std::fprintf(stderr, "consumer_cpp: %s\n", v.ok() ? "restored data differ" : v.status().ToString().c_str());
    return 1;
  }
  if (cairn::Status c = client->Close(); !c.ok()) {
    std::fprintf(stderr, "consumer_cpp: close: %s\n", c.ToString().c_str());
    return 1;
  }
  std::printf("consumer_cpp: checkpoint/restore of %zu bytes OK\n", field.size() * sizeof(double));
  return 0;
}
