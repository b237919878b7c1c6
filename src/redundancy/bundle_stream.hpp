// A redundancy level's bundle (docs/format.md 3.9) read piecewise, and a
// file written piecewise and then committed: what L3's streamed rebuild
// (docs/mpi.md "Parity (L3)") needs so that no rank holds a whole
// version in memory or reads a file twice.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cairn/config.hpp"
#include "cairn/status.hpp"
#include "os/fs/aligned_writer.hpp"
#include "os/fs/fs.hpp"
#include "redundancy/bundle_parser.hpp"
#include "redundancy/checkpoints.hpp"

namespace cairn::redundancy {

// The bundle of `version` in dir/name, read from its chain's files on demand.
class BundleReader {
 public:
  // `cache` (may be null): the member's checkpoints, whose host cache
  // FromCache asks (Checkpoints::CopyCached).
  static Result<std::unique_ptr<BundleReader>> Open(const Config& c, const std::string& dir,
                                                    const std::string& name, int64_t version,
                                                    Checkpoints* cache = nullptr);
  ~BundleReader();
  uint64_t size() const { return size_; }
  // Bytes [offset, offset + n) of the bundle into dst; zeros past its end
  // (the padding of an XOR chunk).
  Status Read(uint64_t offset, uint8_t* dst, size_t n);
  // Bytes [offset, offset + n) of the bundle in place, read in through a
  // mapping of their file (os::FileView), when they lie inside one file and
  // it can be mapped; otherwise (a head, a range across files or past the
  // end, a file that cannot be mapped, a read error) nullptr: the caller
  // reads them with Read, which reports what is wrong. Valid while this
  // reader lives.
  const uint8_t* View(uint64_t offset, size_t n);
  // Starts reading bytes [offset, offset + n) in, without waiting, where
  // they lie inside one file that View mapped already (os::FileView::
  // WillNeed); otherwise nothing. A hint for the View that will follow.
  void WillNeed(uint64_t offset, size_t n);
  // Bytes [offset, offset + n) of the bundle into dst from the host cache
  // of Open's `cache` (zeros past the end), when it holds every one of them:
  // a version just committed need not be read back from the disk that the
  // local files, the partner copies and the parity share. false (dst
  // partly written) when it lacks some, or without a cache: the caller
  // reads them with View or Read.
  bool FromCache(uint64_t offset, uint8_t* dst, size_t n);

 private:
  BundleReader() = default;
  struct Segment {
    uint64_t at = 0, bytes = 0;  // where it lies in the bundle
    os::File* file = nullptr;    // its contents; nullptr: heads_[head ..)
    int64_t number = -1;         // file's version
    size_t head = 0;
    std::unique_ptr<os::FileView> view;  // file's mapping, once View asked
    bool unmapped = false;               // Map failed: not asked again
  };
  // Bytes [offset, offset + n) into dst: zeros past the end, the heads
  // from heads_, each file's part from file_part(segment, offset in its
  // file, dst, bytes); stops at its first error.
  using FileFn = std::function<Status(const Segment&, uint64_t, uint8_t*, uint64_t)>;
  Status Gather(uint64_t offset, uint8_t* dst, size_t n, const FileFn& file_part);
  // The segment that holds `offset` (the first one when none starts at or
  // before it).
  std::vector<Segment>::iterator SegmentAt(uint64_t offset);
  std::vector<std::unique_ptr<os::File>> files_;
  std::vector<uint8_t> heads_;  // the count and each file's [number][bytes]
  std::vector<Segment> segments_;
  uint64_t size_ = 0;
  Checkpoints* cache_ = nullptr;
  std::string name_;
};

// dir/file written at any offsets into a temp file, then committed with
// fsync + rename + directory fsync (docs/format.md 3.3); destroyed without
// Commit it removes the temp file, so a failed rebuild leaves nothing. With
// config.direct_io (and a file system that takes O_DIRECT) the pieces go
// to the disk directly, the whole blocks at once and the rest once whole
// or at Commit (os::AlignedWriter), so that a parity file or a rebuilt
// bundle does not pass through fresh page-cache memory; else buffered, each
// piece's writeback started as it is written (when config.fsync).
class PendingFile {
 public:
  static Result<std::unique_ptr<PendingFile>> Create(const Config& c, const std::string& dir,
                                                     const std::string& file);
  ~PendingFile();
  Status WriteAt(const uint8_t* data, size_t n, uint64_t offset);
  Status Commit();

 private:
  PendingFile(const Config& c, std::string dir, std::string file, std::string tmp)
      : config_(c), dir_(std::move(dir)), file_(std::move(file)), tmp_(std::move(tmp)) {}
  const Config& config_;
  std::string dir_, file_, tmp_;
  std::unique_ptr<os::File> out_;
  std::unique_ptr<os::AlignedWriter> writer_;  // over out_
  bool committed_ = false;
};

// A bundle received in order, in pieces of any size, written into dir (a
// name directory) as it arrives: each file into a PendingFile, committed
// bases first by Commit once the whole bundle came and parsed (so the
// directory never shows a version whose chain is broken, docs/format.md
// 4.8). Destroyed without Commit, or after an error, it leaves nothing.
class BundleWriter final : private BundleParser::Events {
 public:
  // `from` names the sender in errors; `total` is the size it announced.
  BundleWriter(const Config& c, std::string dir, std::string from, uint64_t total)
      : config_(c), dir_(std::move(dir)), parser_(std::move(from), total) {}
  // The next n bytes. The first error (malformed, kCorrupt; or a write)
  // is returned by this and every later call, and by Commit.
  Status Append(const uint8_t* data, size_t n);
  Status Commit();

 private:
  Status File(int64_t number, uint64_t bytes) override;
  Status Content(const uint8_t* data, size_t n, uint64_t offset) override;

  const Config& config_;
  const std::string dir_;
  BundleParser parser_;
  std::vector<std::unique_ptr<PendingFile>> files_;  // newest first, as they came
};

}  // namespace cairn::redundancy
