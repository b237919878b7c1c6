// The Reed-Solomon rebuild of up to e lost members of a set (the parity
// level's Fetch for mpi.l3_code = rs; docs/mpi.md "Parity (L3)";
// docs/format.md 3.9 is normative). Internal to libcairn.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "cairn/config.hpp"
#include "cairn/group.hpp"
#include "cairn/status.hpp"
#include "redundancy/parity/xor_parity.hpp"

namespace cairn {
struct MpiStats;  // cairn/cairn.hpp
}

namespace cairn::parity::impl {

// Version v of `name` back on the members at positions `lost` (1 to e of
// them, the same list on every member) from the others' bundles and parity
// rows, streamed window by window: for each stripe of a lost member's
// chunk, the first k of its symbols that survive go to it, and it decodes
// the chunk (ReedSolomon::Decoder), checks the whole bundle against the
// CRC the parity recorded, and commits it. Then, when every lost member
// has it back, the lost members' own parity rows of v are encoded again
// from every member's bundle (Reencode). Collective over the set. Returns, on a lost
// member, what it got back ("" when nothing); "" on the others. Things
// that did not work and do not fail the call (a damaged survivor, a
// refused rebuild, the re-encoding) go to *notes; the phases to *times.
Result<std::string> RebuildRs(Group& group, const Sets& sets, const Config& config, MpiStats* times,
                              const std::string& name, int64_t v, const std::vector<size_t>& lost,
                              std::vector<std::string>* notes);

}  // namespace cairn::parity::impl
