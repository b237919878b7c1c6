// Bundles sent from member to member at a collective call, in windows
// (docs/format.md 3.8, "Recovery"): the partner copies of the collective
// path, and a recovery's partner fetches and re-sends. A member holds one
// window per bundle it sends or receives, never a whole version; the
// receiver writes each file as its bytes arrive (BundleWriter) and commits
// the version only once all of it came and parsed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cairn/config.hpp"
#include "cairn/group.hpp"
#include "cairn/status.hpp"
#include "redundancy/bundle_stream.hpp"

namespace cairn::redundancy {

// Bytes of a bundle per message; the last one of a bundle is shorter.
inline constexpr size_t kBundleWindow = size_t{8} << 20;

struct BundleSend {
  int to = -1;
  // The bundle; null: nothing to send (the receiver learns it and stores
  // nothing). Read piecewise; a read error ends the sending.
  std::unique_ptr<BundleReader> reader;
};

struct BundleReceive {
  int from = -1;
  std::string dir;  // the name directory its files go into
};

struct BundleOutcome {
  // Per send: OK, or this member's read error (the receiver then stores
  // nothing).
  std::vector<Status> sent;
  // Per receive: OK (committed in its dir), kNotFound (the sender had
  // nothing to send, or could not read all of it: nothing stored), or
  // what went wrong here (a malformed bundle, naming the sender; a write).
  std::vector<Status> received;
};

// Collective over the group: every member calls it at once, with matching
// patterns (what a sends to b, b expects from a; at most one bundle per
// pair), one reduction setting the number of rounds. Returns an error only
// when the transport fails; the bundles' own outcomes are in BundleOutcome.
Result<BundleOutcome> ExchangeBundles(Group& group, const Config& c, std::vector<BundleSend> sends,
                                      const std::vector<BundleReceive>& receives,
                                      size_t window = kBundleWindow);

}  // namespace cairn::redundancy
