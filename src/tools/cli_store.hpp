// The `cairn` tool's view of a Cairn directory (docs/format.md 3.1): which
// names and files it holds, where Cairn directories are below a path, and
// verification of files and chains with each file read once.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cairn/status.hpp"
#include "format/layout.hpp"
#include "os/fs/fs.hpp"

namespace cairn::cli {

// A file of the store, classified by its name.
struct StoreFile {
  std::string name;  // the entry's name (its directory)
  std::string path;
  format::EntryKind kind = format::EntryKind::kCheckpoint;
  int64_t number = 0;
  bool temp = false;
  long pid = 0;  // temp files only
};

// The valid names in dir, sorted. Subdirectories that are not valid names
// are not Cairn's and are skipped.
Result<std::vector<std::string>> ListNames(os::FileSystem* fs, const std::string& dir);
// Committed and temp files of one name, ordered by kind, then number.
// Foreign files are skipped.
Result<std::vector<StoreFile>> ListFiles(os::FileSystem* fs, const std::string& dir,
                                         const std::string& name);
// The Cairn directories (holding <name>/<committed file>) at or below dir,
// up to `levels` below, sorted.
void FindCairnDirs(os::FileSystem* fs, const std::string& dir, int levels,
                   std::vector<std::string>* out);

// A one-line description naming the path exactly once: format errors start
// with it ("PATH: block 3 ..."), OS errors contain it ("open PATH: ...").
std::string Describe(const std::string& path, const Status& s);
// "v7" or "h7": how chain messages name a link.
std::string Short(format::EntryKind kind, int64_t number);
// The message without a leading "PATH: " (when a row already names the file).
std::string StripPath(const std::string& path, std::string what);

// Verifies files, each at most once, and the chains of layered versions.
class Verifier {
 public:
  explicit Verifier(os::FileSystem* fs) : fs_(fs) {}
  // The file's own damage, else its chain's: a broken or damaged link is
  // named "TIP: v7 -> base v5: ...".
  Status Check(const std::string& dir, const StoreFile& f);

 private:
  Status File(const std::string& path);  // Open + VerifyAll, memoized
  os::FileSystem* fs_;
  std::map<std::string, Status> done_;
};

}  // namespace cairn::cli
