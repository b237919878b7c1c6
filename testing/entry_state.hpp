// Tests set an entry's stage state directly: in the library only the
// BlockStore's named transitions write it (entry.hpp), and a test of a stage
// or of the catalog would otherwise have to replay a whole history of
// transitions to build the entry it needs. Tests only.
#pragma once

#include <vector>

#include "engine/entry.hpp"

namespace cairn::core {

struct EntryTestAccess {
  struct State {
    std::vector<BlockState>& blocks;
    CaptureState& capture;
    LocalState& local;
    PersistState& persist;
    ReadState& reads;
    int& pins;
    bool& consumed;
  };
  static State Of(Entry& e) {
    return {e.blocks_, e.capture_, e.local_, e.persist_, e.reads_, e.pins_, e.consumed_};
  }
};

}  // namespace cairn::core

namespace cairn::test {

// test::StateOf(*e).local.committed = true;
inline core::EntryTestAccess::State StateOf(core::Entry& e) { return core::EntryTestAccess::Of(e); }

}  // namespace cairn::test
