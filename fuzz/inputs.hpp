// What each fuzz target does with one input (docs/design.md, "Fuzzing").
// fuzz/<target>_fuzz.cpp hands libFuzzer's bytes to these; the test suite
// (tests/fuzz_corpus_test.cpp) replays the seed corpus and every committed
// finding (tests/data/fuzz/<target>/) through the same functions, so a
// finding reproduces in the normal build, under ASan and UBSan in CI.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cairn/status.hpp"

namespace cairn::fuzz {

// fuzz_file_reader: the bytes as a data file, read the way `cairn verify`
// and a restore read one. Returns the first error of the bytes as given
// (OK for a valid file). They are then read again with the file size and
// the checksums that v1's header, table and footer record repaired, so that
// mutations get past those checks.
Status ReadFileInput(const uint8_t* data, size_t size);

// fuzz_config: TOML text up to the first NUL byte, then NAME=VALUE lines for
// the CAIRN_* variables (others ignored), loaded like a config file with the
// environment. Returns LoadConfig's status; anything but OK, kConfig or
// kNoMemory is a bug. Changes the process environment while it runs.
Status LoadConfigInput(const uint8_t* data, size_t size);

// fuzz_veloc_config, fuzz_fti_config: the bytes as a VELOC configuration
// file (libcairn_veloc's reader, src/compat/veloc/veloc_config.hpp) or an FTI one
// (src/compat/fti/fti_config.hpp), parsed as VELOC_Init / FTI_Init parse theirs.
// Returns the parser's status; anything but OK, kConfig or kNoMemory is a bug.
Status ParseVelocConfigInput(const uint8_t* data, size_t size);
Status ParseFtiConfigInput(const uint8_t* data, size_t size);

// fuzz_manifest: the bytes as a global manifest (docs/format.md 3.6, either
// version), parsed as a restart parses a rank's. Returns the parser's
// status; anything but OK or kCorrupt is a bug.
Status ParseManifestInput(const uint8_t* data, size_t size);

// fuzz_partner_head: the bytes as the head of a partner copy (docs/format.md
// 3.8), parsed as a holder parses one from a source. Returns the parser's
// status, or kInternal when an accepted head does not encode back to the
// same bytes; anything but OK or kCorrupt is a bug.
Status ParsePartnerHeadInput(const uint8_t* data, size_t size);

// fuzz_partner_messages: the first byte (mod 3) chooses the message, the
// rest is its bytes: 0 a chunk that should be chunk 0, 1 the holder's
// answer to version 7, 2 an abort notice (docs/format.md 3.8), parsed as a
// rank parses one from another. Returns the parser's status (OK for a
// damaged chunk, which the transfer reports), or kInternal when an accepted
// message does not encode back to the same bytes; anything but OK or
// kCorrupt is a bug.
Status ParsePartnerMessagesInput(const uint8_t* data, size_t size);

// fuzz_parity_header: the bytes as an XOR parity file (docs/format.md 3.9),
// whose header is parsed as a rebuild parses a survivor's. Returns the
// parser's status, or kInternal when an accepted header does not encode back
// to the same bytes; anything but OK or kCorrupt is a bug.
Status ParseParityHeaderInput(const uint8_t* data, size_t size);

// fuzz_bundle: the first byte sets the size of the pieces (1 + byte mod
// 64) the rest arrives in, as a bundle one rank sends another
// (docs/format.md 3.9), parsed as a receiver parses one. Returns the
// parser's status, or kInternal when an accepted bundle does not encode
// back to the same bytes; anything but OK or kCorrupt is a bug.
Status ParseBundleInput(const uint8_t* data, size_t size);

// What every configuration target accepts as the outcome of an input: OK, a
// configuration error or no memory. Anything else is a finding.
inline bool ConfigOutcome(const Status& s) {
  return s.ok() || s.code() == Code::kConfig || s.code() == Code::kNoMemory;
}

}  // namespace cairn::fuzz
