// libcairn_veloc's state: one VELOC client per process (VELOC's API has no
// handle), over one cairn::Client (docs/veloc.md). The extern "C" functions
// of veloc.cpp call these methods; each returns a Status that veloc.cpp turns
// into VELOC_SUCCESS / VELOC_FAILURE and a line on stderr. Not thread-safe,
// as VELOC's client is not: one thread calls the API.
#ifndef CAIRN_COMPAT_VELOC_SHIM_HPP_
#define CAIRN_COMPAT_VELOC_SHIM_HPP_

#include <climits>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cairn/cairn.hpp"
#include "compat/peer_version.hpp"
#include "compat/veloc/veloc_config.hpp"

namespace cairn::veloc {

// Region ids below kReservedBelow are the shim's: the version's table of
// contents (header and table) and the captured files.
inline constexpr int kMetaHeader = INT_MIN;
inline constexpr int kMetaTable = INT_MIN + 1;
inline constexpr int kFirstFile = INT_MIN + 2;
inline constexpr int kReservedBelow = INT_MIN + 65536;

// One row of a version's table of contents (docs/veloc.md, "What a version
// holds"): a memory region or a file captured from its routed path.
struct TableEntry {
  int32_t id = 0;       // the application's id, or the file's region id
  uint32_t kind = 0;    // kMemory or kFile
  uint64_t bytes = 0;
  std::string file;     // kFile: the original path (absolute)
  static constexpr uint32_t kMemory = 0, kFile = 1;
};

class Shim {
 public:
  // tag names this process in an earlier libcairn_veloc's routed paths
  // ("rank3", "id7"), unique_id in VELOC's (3, 7).
  Shim(std::unique_ptr<Client> client, bool sync, std::string scratch_root, std::string tag, int unique_id);

  // group: the checkpoint name the region belongs to, "" = the default group.
  Status MemProtect(int id, void* ptr, size_t count, size_t base_size, const char* group);
  Status MemUnprotect(int id, const char* group);
  Status MemClear(const char* group);
  Result<std::string> RouteFile(const char* original);

  Status CheckpointBegin(const char* name, int version);
  Status CheckpointSelective(int mode, const int* ids, int id_count);
  Status CheckpointEnd();
  Status CheckpointWait();
  Result<bool> BackendReady();

  // VELOC's rule: the highest VELOC version <= bound (0: any) among the
  // intact ones, agreed by every rank; kNotFound if none. A version taken
  // more than once counts by its newest checkpoint.
  Result<int64_t> RestartTest(const char* name, int bound);
  Status RestartBegin(const char* name, int version);
  Status RecoverSelective(int mode, const int* ids, int id_count);
  Result<int64_t> RecoverSize(int id) const;
  Status RestartEnd();

  // VELOC's cleanup: this process's scratch copies of `name` deleted, once
  // its checkpoints have reached the persistent directory (those stay).
  Status Cleanup(const char* name);

  // Finalize: waits for the last checkpoint when drain, then closes Cairn.
  Status Close(bool drain);

 private:
  struct Region {
    void* ptr = nullptr;
    size_t bytes = 0;
    bool operator==(const Region&) const = default;
  };
  enum class Phase { kNone, kCheckpoint, kRestart };

  // Makes Cairn's protected regions exactly `want` (only the changes are
  // passed on: an unchanged region keeps its change tracking).
  Status Register(const std::map<int, Region>& want);
  // Unprotects the file regions (before their buffers are freed).
  Status DropFileRegions();
  Status ReadTable();
  Status CaptureFiles(std::map<int, Region>* want);
  Status MaterializeFiles();
  // The Cairn version of the newest checkpoint of name_ taken as VELOC
  // version version_ (kNotFound if none is intact): the one RestartTest
  // found, else a scan of the kept versions.
  Result<int64_t> NewestTaken();
  // found_ from the kept intact versions of `name`, newest first
  // (collective: one Client::Latest each); found_name_ = name once done.
  Status FindTaken(const std::string& name);
  // Where VELOC_Route_file routes the phase's file (VELOC's path).
  std::string RoutedPath() const;
  // An earlier libcairn_veloc's versions with several routed files: their
  // directory (each file under its escaped original).
  std::string PhaseDir() const;
  size_t FileEntries() const;  // file rows in table_
  void RemovePhaseFiles();

  std::unique_ptr<Client> client_;
  const bool sync_;
  const std::string scratch_root_;
  const std::string tag_;
  const int unique_id_;
  // The regions that a checkpoint or restart of name_ uses: name_'s group
  // if it has regions, else the default group (VELOC's rule).
  std::map<int, Region>& Regions();

  std::map<std::string, std::map<int, Region>> groups_;  // the application's, by group and VELOC id
  std::map<int, Region> registered_;  // what Cairn has protected now

  Phase phase_ = Phase::kNone;
  std::string name_;                  // the phase's checkpoint
  int version_ = -1;                  // ... its VELOC version
  int64_t cairn_version_ = -1;        // ... and Cairn version (compat/peer_version.hpp)
  compat::PeerVersions versions_;
  // RestartTest's finding: the Cairn version of each VELOC version of found_name_.
  std::string found_name_;
  std::map<int, int64_t> found_;
  bool mem_selected_ = false;         // Checkpoint_mem/_selective called in this phase
  std::set<int> selection_;           // the memory regions it chose
  std::vector<std::string> files_;    // the routed original (absolute): none or one
  std::vector<std::vector<uint8_t>> file_data_;  // files read at Checkpoint_end / restored
  std::vector<uint8_t> table_bytes_;  // the serialized table of contents
  uint64_t header_[4] = {};           // magic, format, entries, table bytes
  std::vector<TableEntry> table_;     // the restart phase's version's

  std::string last_name_;             // the last checkpoint not yet waited for
  int64_t last_version_ = -1;         // ... its Cairn version
};

}  // namespace cairn::veloc

#endif  // CAIRN_COMPAT_VELOC_SHIM_HPP_
