// FTI's configuration file (an INI file: [basic], [restart], [injection],
// [advanced]) read, checked and reduced to what Cairn uses (docs/fti.md,
// "Configuration"). Pure: no MPI, no environment; fti.cpp applies it.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "cairn/status.hpp"

namespace cairn::fti {

struct FtiConfig {
  std::string ckpt_dir;  // [basic] ckpt_dir -> storage.scratch (node-local)
  std::string glbl_dir;  // [basic] glbl_dir -> storage.persistent (L4)
  int node_size = 1;     // ranks per node (with local_test = 1: simulated nodes)
  int group_size = 4;    // parity set size (L3)
  std::array<int, 4> interval = {0, 0, 0, 0};  // ckpt_l1..ckpt_l4 (minutes; 0 = off)
  bool keep_last_ckpt = false;
  bool dcp = false;         // enable_dcp -> checkpoint.changes = hash
  int dcp_block_size = 0;   // dcp_block_size -> checkpoint.hash_chunk (0: Cairn's default)
  int dcp_stack_size = 0;   // dcp_stack_size: dCP checkpoints per FTI file -> checkpoint.max_layers = it - 1 (0: Cairn's default)
  int verbosity = 2;        // FTI_DBUG 1 .. FTI_EROR 4
  bool local_test = false;  // [advanced] local_test: nodes simulated on one machine
  // [cairn] (Cairn's own section; FTI ignores sections it does not know):
  int auto_level = 0;  // auto_level: FTI_Snapshot's level under Young/Daly (0 = off)
  int mtbf_s = 0;      // mtbf_s -> checkpoint.mtbf_s (0: CAIRN_MTBF or Cairn's config)
  // Keys read but without effect in Cairn, each with why (printed at
  // verbosity <= FTI_INFO by rank 0).
  std::vector<std::string> notes;
};

// Parses the text of a configuration file (`path` names it in errors).
// kConfig naming the line and key for: a line that is not `key = value`, a
// section or key FTI does not know, a value of the wrong kind or range, a
// missing ckpt_dir / glbl_dir, and the settings Cairn does not provide
// (head = 1, enable_staging = 1, say why).
Result<FtiConfig> ParseConfig(const std::string& text, const std::string& path);

// Reads and parses the file.
Result<FtiConfig> LoadConfig(const std::string& path);

}  // namespace cairn::fti
