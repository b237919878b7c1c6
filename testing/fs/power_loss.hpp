// PowerLossModel: what a directory tree would hold after a power failure.
// FaultFs (testing/fs/fault_fs.hpp) feeds it every change it lets through to the
// real files under a root, and PowerLoss() rewrites that tree to what the
// model says survived.
//
// The model follows POSIX (and ext4/xfs without special mount options):
//   * a file's data and size survive only as of its last fsync/fdatasync;
//     writes and truncations after it may be lost (or partly kept: torn);
//   * a directory entry (create, rename, unlink, mkdir, rmdir) survives only
//     once its parent directory has been fsynced after the change; fsyncing
//     the file does not persist its name;
//   * an entry whose parent directory did not survive is lost with it.
// Files are tracked by identity (an inode number of the model), so a rename
// moves data, and a file written, fsynced and then renamed without a
// directory fsync reappears under its old name.
//
// Not thread-safe: FaultFs calls it under its own lock.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cairn/status.hpp"
#include "os/fs/fs.hpp"

namespace cairn::test {

// What becomes of changes that were not made durable by an fsync.
enum class Unsynced {
  kDrop,  // all lost: the strictest model
  kTear,  // an older part survives: per file, the first half of its unsynced
          // writes (the last of them cut in half); of the unsynced directory
          // changes, the first half in the order they were made
  kKeep,  // all kept (what SIGKILL leaves, since the page cache survives)
};

class PowerLossModel {
 public:
  // Starts tracking everything under `root` (an existing directory), taking
  // what is there now as durable. Paths are compared as strings: callers
  // pass them as they pass them to the file system (no "//", no trailing '/').
  Status Start(os::FileSystem* base, const std::string& root);
  bool active() const { return !root_.empty(); }
  bool Tracks(const std::string& path) const;

  // Changes that reached the base file system (call only after success).
  // Open for writing (create or truncate; in place when !truncate, of an
  // existing file): returns the file's identity.
  uint64_t OnOpenWrite(const std::string& path, bool truncate = true);
  void OnWrite(uint64_t inode, const void* buf, size_t n, uint64_t offset);
  void OnTruncate(uint64_t inode, uint64_t size);
  void OnSync(uint64_t inode);
  void OnRename(const std::string& from, const std::string& to);
  void OnRemove(const std::string& path);
  void OnCreateDirs(const std::string& path);  // mkdir -p: the missing ones
  void OnRemoveDir(const std::string& path);
  void OnSyncDir(const std::string& path);

  // Rewrites the tree under the root, through `base`, to what survives a
  // power loss now, then starts over from that state (all of it durable).
  Status PowerLoss(os::FileSystem* base, Unsynced unsynced);

  // Changes not yet durable: unsynced file data (files with pending writes)
  // plus directory changes not yet covered by a directory fsync.
  size_t pending() const;

 private:
  struct Node {
    bool dir = false;
    uint64_t inode = 0;  // files only
  };
  // One change of the namespace: `path` now names `node` (or nothing).
  struct Change {
    std::string path;
    bool present = false;
    Node node;
  };
  struct DataOp {
    uint64_t offset = 0;  // write offset, or the new size of a truncation
    std::string bytes;    // written bytes; empty for a truncation
    bool truncate = false;
  };
  struct Inode {
    std::string durable;  // content as of the last fsync
    std::vector<DataOp> pending;
  };

  static void Apply(const DataOp& op, std::string* content);
  void Record(std::vector<Change> changes);  // one operation's changes
  void ApplyChange(const Change& c, std::map<std::string, Node>* ns) const;

  std::string root_;
  uint64_t next_inode_ = 1;
  std::map<uint64_t, Inode> inodes_;
  std::map<std::string, Node> current_;  // what the file system shows now
  std::map<std::string, Node> durable_;  // what a power loss would leave
  // Directory changes not yet durable, one element per operation, in order.
  std::vector<std::vector<Change>> log_;
};

}  // namespace cairn::test
