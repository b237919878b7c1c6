// An in-memory os::FileSystem for the format tests: rejects misaligned
// direct writes (so the writer's 4096-byte discipline is checked) and gives
// tests the bytes of every file to damage. Test-only.
#pragma once

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "os/fs/fs.hpp"

namespace cairn::format::testing {

using Bytes = std::vector<uint8_t>;

// ---- In-memory file system -------------------------------------------------

class MemFile : public os::File {
 public:
  MemFile(std::string path, std::shared_ptr<Bytes> data, bool direct, bool* misaligned)
      : path_(std::move(path)), data_(std::move(data)), direct_(direct), misaligned_(misaligned) {}
  Status WriteAt(const void* buf, size_t n, uint64_t offset) override {
    if (closed_) return Status::Io("write " + path_ + ": closed");
    if (direct_ && (reinterpret_cast<uintptr_t>(buf) % 4096 != 0 || n % 4096 != 0 ||
                    offset % 4096 != 0)) {
      *misaligned_ = true;
      return Status::Io("write " + path_ + ": Invalid argument (misaligned direct write)");
    }
    if (data_->size() < offset + n) data_->resize(offset + n);
    std::memcpy(data_->data() + offset, buf, n);
    return Status::Ok();
  }
  Status ReadAt(void* buf, size_t n, uint64_t offset) override {
    if (offset + n > data_->size()) return Status::Corrupt("short read " + path_);
    std::memcpy(buf, data_->data() + offset, n);
    return Status::Ok();
  }
  Status Sync() override { return closed_ ? Status::Io("closed") : Status::Ok(); }
  Result<uint64_t> Size() override { return static_cast<uint64_t>(data_->size()); }
  Status Truncate(uint64_t size) override {
    data_->resize(size);
    return Status::Ok();
  }
  Status Close() override {
    closed_ = true;
    return Status::Ok();
  }
  const std::string& path() const override { return path_; }
  bool direct() const override { return direct_; }

 private:
  std::string path_;
  std::shared_ptr<Bytes> data_;
  bool direct_;
  bool* misaligned_;
  bool closed_ = false;
};

class MemFs : public os::FileSystem {
 public:
  bool refuse_direct = false;  // behave like tmpfs
  bool misaligned = false;     // set by any misaligned direct write
  int dir_syncs = 0;

  Result<std::unique_ptr<os::File>> Open(const std::string& path,
                                         const os::OpenOptions& o) override {
    if (o.direct && refuse_direct) return Status::Unsupported("open " + path + ": O_DIRECT");
    if (o.write) {
      files[path] = std::make_shared<Bytes>();
    } else if (!files.count(path)) {
      return Status::NotFound("open " + path + ": No such file or directory");
    }
    return std::unique_ptr<os::File>(new MemFile(path, files[path], o.direct, &misaligned));
  }
  Status Rename(const std::string& from, const std::string& to) override {
    auto it = files.find(from);
    if (it == files.end()) return Status::NotFound("rename " + from);
    files[to] = it->second;
    files.erase(from);
    return Status::Ok();
  }
  Status Remove(const std::string& path) override {
    return files.erase(path) ? Status::Ok() : Status::NotFound("remove " + path);
  }
  Status CreateDirs(const std::string&, uint32_t) override { return Status::Ok(); }
  Status RemoveDir(const std::string&) override { return Status::Ok(); }
  Status SyncDir(const std::string&) override {
    ++dir_syncs;
    return Status::Ok();
  }
  Result<std::vector<os::DirEntry>> List(const std::string& dir) override {
    std::vector<os::DirEntry> out;
    for (const auto& [path, data] : files) {
      if (path.rfind(dir + "/", 0) == 0 && path.find('/', dir.size() + 1) == std::string::npos) {
        out.push_back({path.substr(dir.size() + 1), false});
      }
    }
    return out;
  }
  Result<os::FileInfo> Stat(const std::string& path) override {
    auto it = files.find(path);
    if (it == files.end()) return Status::NotFound("stat " + path);
    os::FileInfo fi;
    fi.size = it->second->size();
    return fi;
  }

  std::map<std::string, std::shared_ptr<Bytes>> files;
};

}  // namespace cairn::format::testing
