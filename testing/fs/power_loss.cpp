#include "testing/fs/power_loss.hpp"

#include <algorithm>
#include <memory>
#include <set>
#include <utility>

namespace cairn::test {
namespace {

std::string Parent(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

// Reads a whole file through `fs`.
Result<std::string> ReadAll(os::FileSystem* fs, const std::string& path) {
  CAIRN_ASSIGN_OR_RETURN(auto file, fs->Open(path, os::OpenOptions{}));
  CAIRN_ASSIGN_OR_RETURN(uint64_t size, file->Size());
  std::string content(size, '\0');
  if (size > 0) CAIRN_RETURN_IF_ERROR(file->ReadAt(content.data(), size, 0));
  return content;
}

// Removes everything inside `dir` (not dir itself).
Status RemoveContents(os::FileSystem* fs, const std::string& dir) {
  CAIRN_ASSIGN_OR_RETURN(auto entries, fs->List(dir));
  for (const os::DirEntry& e : entries) {
    const std::string path = os::JoinPath(dir, e.name);
    if (e.is_dir) {
      CAIRN_RETURN_IF_ERROR(RemoveContents(fs, path));
      CAIRN_RETURN_IF_ERROR(fs->RemoveDir(path));
    } else {
      CAIRN_RETURN_IF_ERROR(fs->Remove(path));
    }
  }
  return Status::Ok();
}

}  // namespace

Status PowerLossModel::Start(os::FileSystem* base, const std::string& root) {
  root_.clear();
  inodes_.clear();
  current_.clear();
  durable_.clear();
  log_.clear();
  // Breadth-first over the tree: parents are recorded before their children.
  std::vector<std::string> dirs{root};
  for (size_t i = 0; i < dirs.size(); ++i) {
    CAIRN_ASSIGN_OR_RETURN(auto entries, base->List(dirs[i]));
    for (const os::DirEntry& e : entries) {
      const std::string path = os::JoinPath(dirs[i], e.name);
      Node node{.dir = e.is_dir};
      if (e.is_dir) {
        dirs.push_back(path);
      } else {
        CAIRN_ASSIGN_OR_RETURN(std::string content, ReadAll(base, path));
        node.inode = next_inode_++;
        inodes_[node.inode].durable = std::move(content);
      }
      current_[path] = node;
    }
  }
  durable_ = current_;
  root_ = root;
  return Status::Ok();
}

bool PowerLossModel::Tracks(const std::string& path) const {
  return active() && path.size() > root_.size() + 1 && path.compare(0, root_.size(), root_) == 0 &&
         path[root_.size()] == '/';
}

void PowerLossModel::Record(std::vector<Change> changes) {
  for (const Change& c : changes) ApplyChange(c, &current_);
  log_.push_back(std::move(changes));
}

void PowerLossModel::ApplyChange(const Change& c, std::map<std::string, Node>* ns) const {
  if (c.present) {
    (*ns)[c.path] = c.node;
  } else {
    ns->erase(c.path);
  }
}

void PowerLossModel::Apply(const DataOp& op, std::string* content) {
  if (op.truncate) {
    content->resize(op.offset, '\0');
    return;
  }
  if (content->size() < op.offset + op.bytes.size())
    content->resize(op.offset + op.bytes.size(), '\0');
  content->replace(op.offset, op.bytes.size(), op.bytes);
}

uint64_t PowerLossModel::OnOpenWrite(const std::string& path, bool truncate) {
  if (auto it = current_.find(path); it != current_.end() && !it->second.dir) {
    // O_TRUNC on an existing file: same file, its size change is data.
    if (truncate) inodes_[it->second.inode].pending.push_back(DataOp{.offset = 0, .truncate = true});
    return it->second.inode;
  }
  const uint64_t inode = next_inode_++;
  inodes_[inode];  // empty and durable as such: a new file may come back empty
  Record({Change{.path = path, .present = true, .node = Node{.inode = inode}}});
  return inode;
}

void PowerLossModel::OnWrite(uint64_t inode, const void* buf, size_t n, uint64_t offset) {
  if (n == 0) return;
  inodes_[inode].pending.push_back(
      DataOp{.offset = offset, .bytes = std::string(static_cast<const char*>(buf), n)});
}

void PowerLossModel::OnTruncate(uint64_t inode, uint64_t size) {
  inodes_[inode].pending.push_back(DataOp{.offset = size, .truncate = true});
}

void PowerLossModel::OnSync(uint64_t inode) {
  Inode& node = inodes_[inode];
  for (const DataOp& op : node.pending) Apply(op, &node.durable);
  node.pending.clear();
}

void PowerLossModel::OnRename(const std::string& from, const std::string& to) {
  auto it = current_.find(from);
  if (it == current_.end()) return;  // from outside the tracked tree: not modelled
  // A directory's children would move with it; Cairn renames only files,
  // and a renamed directory is modelled as its entry alone.
  const Node node = it->second;
  Record(
      {Change{.path = to, .present = true, .node = node}, Change{.path = from, .present = false}});
}

void PowerLossModel::OnRemove(const std::string& path) {
  Record({Change{.path = path, .present = false}});
}

void PowerLossModel::OnCreateDirs(const std::string& path) {
  for (size_t pos = root_.size() + 1; pos != std::string::npos && pos <= path.size();) {
    pos = path.find('/', pos);
    const std::string prefix = path.substr(0, pos);
    if (!current_.contains(prefix)) {
      Record({Change{.path = prefix, .present = true, .node = Node{.dir = true}}});
    }
    if (pos != std::string::npos) ++pos;
  }
}

void PowerLossModel::OnRemoveDir(const std::string& path) {
  Record({Change{.path = path, .present = false}});
}

void PowerLossModel::OnSyncDir(const std::string& path) {
  for (auto& op : log_) {
    std::erase_if(op, [&](const Change& c) {
      if (Parent(c.path) != path) return false;
      ApplyChange(c, &durable_);
      return true;
    });
  }
  std::erase_if(log_, [](const std::vector<Change>& op) { return op.empty(); });
}

size_t PowerLossModel::pending() const {
  size_t n = log_.size();
  for (const auto& [id, inode] : inodes_) n += inode.pending.empty() ? 0 : 1;
  return n;
}

Status PowerLossModel::PowerLoss(os::FileSystem* base, Unsynced unsynced) {
  if (!active()) return Status::State("PowerLoss: no tree is tracked");
  // The namespace that survives: durable entries plus (torn, kept) a prefix
  // of the unsynced operations.
  std::map<std::string, Node> ns = durable_;
  size_t ops = unsynced == Unsynced::kKeep   ? log_.size()
               : unsynced == Unsynced::kTear ? log_.size() / 2
                                             : 0;
  for (size_t i = 0; i < ops; ++i) {
    for (const Change& c : log_[i]) ApplyChange(c, &ns);
  }
  // An entry survives only with its parent (map order puts parents first).
  std::set<std::string> dirs{root_};
  std::vector<std::pair<std::string, Node>> survivors;
  for (const auto& [path, node] : ns) {
    if (!dirs.contains(Parent(path))) continue;
    if (node.dir) dirs.insert(path);
    survivors.emplace_back(path, node);
  }

  CAIRN_RETURN_IF_ERROR(RemoveContents(base, root_));
  for (const auto& [path, node] : survivors) {
    if (node.dir) {
      CAIRN_RETURN_IF_ERROR(base->CreateDirs(path, 0700));
      continue;
    }
    const Inode& inode = inodes_[node.inode];
    std::string content = inode.durable;
    size_t keep = unsynced == Unsynced::kKeep   ? inode.pending.size()
                  : unsynced == Unsynced::kTear ? (inode.pending.size() + 1) / 2
                                                : 0;
    for (size_t i = 0; i < keep; ++i) {
      DataOp op = inode.pending[i];
      if (unsynced == Unsynced::kTear && i + 1 == keep) op.bytes.resize(op.bytes.size() / 2);
      Apply(op, &content);
    }
    CAIRN_ASSIGN_OR_RETURN(auto file, base->Open(path, os::OpenOptions{.write = true}));
    if (!content.empty()) CAIRN_RETURN_IF_ERROR(file->WriteAt(content.data(), content.size(), 0));
    CAIRN_RETURN_IF_ERROR(file->Close());
  }
  // Powered on again: what is there now is all durable. (A copy: Start
  // clears root_.)
  const std::string root = root_;
  return Start(base, root);
}

}  // namespace cairn::test
