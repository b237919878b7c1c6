// Cairn configuration: what a client is opened with.
//
// A Config is plain data. LoadConfig() builds one from built-in defaults, an
// optional TOML file and CAIRN_* environment variables (in that order, later
// wins), and validates it. docs/config.md lists every key.
#pragma once

#include <cstdint>
#include <string>

#include "cairn/status.hpp"

namespace cairn {

namespace os {
class FileSystem;
}

struct Config {
  // [storage]
  std::string scratch_dir;     // local (node-local) directory; CAIRN_SCRATCH
  std::string persistent_dir;  // shared/persistent directory, "" = none; CAIRN_PERSISTENT
  uint32_t file_mode = 0600;   // permission bits of created files
  bool direct_io = true;       // O_DIRECT for durable checkpoint files when the
                               // file system supports it (falls back silently)
  bool fsync = true;           // fsync files and directories on commit

  // [host_cache]
  uint64_t host_cache_bytes = 512ull << 20;  // CAIRN_HOST_CACHE
  uint64_t block_bytes = 4ull << 20;         // cache chunk == file block size
  // Helper threads lent to the application's blocking copies (capture,
  // restore from the cache); -1 = auto: min(cores - 1, 3). CAIRN_COPY_THREADS
  int copy_threads = -1;

  // [retention]
  int keep_versions = 2;  // committed versions kept per name and tier; CAIRN_KEEP

  // [history]
  int prefetch_depth = 0;        // steps prefetched ahead of pops; 0 = as many as fit
  bool history_persistent = false;  // false: history files are deleted on close

  // [trace]
  std::string trace_path;  // Chrome/Perfetto trace file written at close, "" = off; CAIRN_TRACE

  // Not a config key: the OS layer to use (tests inject faults through it).
  // nullptr selects os::FileSystem::Default(). Not owned.
  os::FileSystem* fs = nullptr;

  // Checks invariants (sizes, directories non-empty, ...). Returns kConfig
  // naming the offending key.
  Status Validate() const;
};

// Built-in defaults: scratch_dir = $TMPDIR/cairn-$USER/scratch (or /tmp/...).
Config DefaultConfig();

// Defaults, then the TOML file at `path` (nullptr or "" = no file), then the
// CAIRN_* environment variables, then Validate(). Unknown keys, bad types and
// bad values give kConfig with the key's name and the file's line.
Result<Config> LoadConfig(const char* path);

// Same, from TOML text (for tests and embedding); `origin` names it in errors.
Result<Config> LoadConfigFromString(std::string_view toml, std::string_view origin,
                                   bool apply_environment);

// "512MiB", "4 GiB", "100MB", "4096" -> bytes. kConfig on anything else.
Result<uint64_t> ParseSize(std::string_view text);
// 536870912 -> "512 MiB" (binary units, up to 3 significant digits).
std::string FormatSize(uint64_t bytes);

}  // namespace cairn
