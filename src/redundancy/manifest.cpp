// The global manifest (manifest.hpp; docs/format.md 3.6, normative).
#include "redundancy/manifest.hpp"

#include <unistd.h>  // getpid: the temp file's name (docs/format.md, 3.3)

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>

#include "format/le.hpp"
#include "os/fs/fs.hpp"
#include "util/crc32c.hpp"

namespace cairn::collective {

namespace {

using format::le::Get32;
using format::le::Get64;
using format::le::Put32;
using format::le::Put64;

constexpr std::string_view kV1Magic = "cairn-global 1\n";
constexpr std::array<uint8_t, 8> kSlotMagic = {'C', 'A', 'I', 'R', 'N', 'G', 'L', 'B'};
constexpr uint32_t kVersion = 2;
// Slot fields (3.6.1).
constexpr size_t kVersionAt = 8, kIndexAt = 12, kSequenceAt = 16, kRanksAt = 24,
                 kCommittedAt = 32, kPersistentAt = 40, kPerNodeAt = 48, kCrcAt = 60;

using SlotBytes = std::array<uint8_t, kManifestSlotBytes>;

SlotBytes EncodeSlot(uint32_t index, uint64_t sequence, const Manifest& m) {
  SlotBytes p{};
  std::memcpy(p.data(), kSlotMagic.data(), kSlotMagic.size());
  Put32(p.data() + kVersionAt, kVersion);
  Put32(p.data() + kIndexAt, index);
  Put64(p.data() + kSequenceAt, sequence);
  Put64(p.data() + kRanksAt, static_cast<uint64_t>(m.ranks));
  Put64(p.data() + kCommittedAt, static_cast<uint64_t>(m.committed));
  Put64(p.data() + kPersistentAt, static_cast<uint64_t>(m.persistent));
  Put64(p.data() + kPerNodeAt, static_cast<uint64_t>(m.ranks_per_node));
  Put32(p.data() + kCrcAt, crc32c::Value(p.data(), kCrcAt));
  return p;
}

struct Slot {
  uint64_t sequence = 0;
  Manifest m;
};

// A valid slot's record; nullopt for a torn, zero or damaged one.
std::optional<Slot> DecodeSlot(const uint8_t* p, uint32_t index) {
  if (std::memcmp(p, kSlotMagic.data(), kSlotMagic.size()) != 0) return std::nullopt;
  if (Get32(p + kCrcAt) != crc32c::Value(p, kCrcAt)) return std::nullopt;
  Slot s{.sequence = Get64(p + kSequenceAt),
         .m = {.ranks = static_cast<int64_t>(Get64(p + kRanksAt)),
               .committed = static_cast<int64_t>(Get64(p + kCommittedAt)),
               .persistent = static_cast<int64_t>(Get64(p + kPersistentAt)),
               .ranks_per_node = static_cast<int64_t>(Get64(p + kPerNodeAt))}};
  if (Get32(p + kVersionAt) != kVersion || Get32(p + kIndexAt) != index || s.sequence < 1 ||
      s.m.ranks < 1 || s.m.committed < -1 || s.m.persistent < -1 || s.m.ranks_per_node < 0) {
    return std::nullopt;
  }
  return s;
}

// What a manifest file holds: its values, and for version 2 which slot has
// them (the other one is the next to write) and its sequence.
struct Current {
  Manifest m;
  int version = 1;
  uint32_t slot = 0;
  uint64_t sequence = 0;
};

Result<Current> ParseV1(std::string_view text, std::string_view path) {
  auto bad = [&](const std::string& why) {
    return Status::Corrupt(std::string(path) + ": not a Cairn global manifest: " + why);
  };
  text.remove_prefix(kV1Magic.size());
  Manifest m;
  std::array<std::pair<std::string_view, int64_t*>, 4> keys{
      {{"ranks", &m.ranks},
       {"committed", &m.committed},
       {"persistent", &m.persistent},
       {"ranks_per_node", &m.ranks_per_node}}};
  for (auto& [key, out] : keys) {
    if (key == "ranks_per_node" && text.empty()) break;  // written before it existed: 0
    const size_t eol = text.find('\n');
    if (eol == std::string_view::npos) return bad("no line '" + std::string(key) + " <n>'");
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol + 1);
    if (line.substr(0, key.size() + 1) != std::string(key) + " ") {
      return bad("expected '" + std::string(key) + " <n>', found '" + std::string(line) + "'");
    }
    // Built by appending: GCC 12 warns falsely (-Wrestrict, its PR 105329)
    // on "'" + std::string(...) here.
    std::string not_number(1, '\'');
    not_number.append(line).append("' is not a number");
    try {
      size_t used = 0;
      const std::string number(line.substr(key.size() + 1));
      *out = std::stoll(number, &used);
      if (used != number.size()) return bad(not_number);
    } catch (const std::exception&) {
      return bad(not_number);
    }
  }
  return Current{.m = m, .version = 1};
}

Result<Current> Parse(std::string_view bytes, std::string_view path) {
  if (bytes.substr(0, kV1Magic.size()) == kV1Magic) return ParseV1(bytes, path);
  const std::string what = std::string(path) + ": not a Cairn global manifest: ";
  if (bytes.size() < kManifestBytes) {
    return Status::Corrupt(what + std::to_string(bytes.size()) + " bytes, neither version 1 text nor a " +
                           std::to_string(kManifestBytes) + "-byte version 2 file");
  }
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  std::optional<Current> best;
  for (uint32_t i = 0; i < 2; ++i) {
    auto s = DecodeSlot(p + i * kManifestSlotBytes, i);
    if (s && (!best || s->sequence > best->sequence)) {
      best = Current{.m = s->m, .version = 2, .slot = i, .sequence = s->sequence};
    }
  }
  if (!best) return Status::Corrupt(what + "neither of its two slots is valid (magic, version, CRC32C)");
  return *best;
}

Result<std::string> ReadSmallFile(os::FileSystem* fs, const std::string& path) {
  CAIRN_ASSIGN_OR_RETURN(auto file, fs->Open(path, os::OpenOptions{}));
  CAIRN_ASSIGN_OR_RETURN(uint64_t size, file->Size());
  // A version 2 file is kManifestBytes; bytes past them are not the format's.
  std::string bytes(std::min<uint64_t>(size, kManifestBytes), '\0');
  CAIRN_RETURN_IF_ERROR(file->ReadAt(bytes.data(), bytes.size(), 0));
  return bytes;
}

// 3.6.1 step 3: a new file, slot 0 holding `m` (sequence 1), slot 1 zero.
Status Create(os::FileSystem* fs, const Config& config, const std::string& dir,
              const std::string& path, const Manifest& m) {
  std::string bytes(kManifestBytes, '\0');
  const SlotBytes slot = EncodeSlot(0, 1, m);
  std::memcpy(bytes.data(), slot.data(), slot.size());
  CAIRN_RETURN_IF_ERROR(fs->CreateDirs(dir, 0700));
  const std::string tmp = dir + "/.global." + std::to_string(::getpid()) + ".tmp";
  Status s = [&]() -> Status {
    CAIRN_ASSIGN_OR_RETURN(auto file, fs->Open(tmp, os::OpenOptions{.write = true, .mode = config.file_mode}));
    CAIRN_RETURN_IF_ERROR(file->WriteAt(bytes.data(), bytes.size(), 0));
    if (config.fsync) CAIRN_RETURN_IF_ERROR(file->Sync());
    CAIRN_RETURN_IF_ERROR(file->Close());
    CAIRN_RETURN_IF_ERROR(fs->Rename(tmp, path));
    return config.fsync ? fs->SyncDir(dir) : Status::Ok();
  }();
  if (!s.ok()) (void)fs->Remove(tmp);
  return s;
}

// 3.6.1 step 2: the slot that does not hold the newest record, in place.
Status Overwrite(os::FileSystem* fs, const Config& config, const std::string& path,
                 const Current& cur, const Manifest& m) {
  const uint32_t slot = 1 - cur.slot;
  const SlotBytes bytes = EncodeSlot(slot, cur.sequence + 1, m);
  CAIRN_ASSIGN_OR_RETURN(auto file, fs->Open(path, os::OpenOptions{.write = true, .in_place = true}));
  CAIRN_RETURN_IF_ERROR(file->WriteAt(bytes.data(), bytes.size(), slot * kManifestSlotBytes));
  if (config.fsync) CAIRN_RETURN_IF_ERROR(file->Sync());
  return file->Close();
}

}  // namespace

Result<Manifest> ParseManifest(std::string_view bytes, std::string_view path) {
  CAIRN_ASSIGN_OR_RETURN(Current cur, Parse(bytes, path));
  return cur.m;
}

Result<Manifest> ReadManifest(os::FileSystem* fs, const std::string& dir, const std::string& name) {
  if (fs == nullptr) fs = os::FileSystem::Default();
  const std::string path = dir + "/" + name + "/global";
  CAIRN_ASSIGN_OR_RETURN(std::string bytes, ReadSmallFile(fs, path));
  return ParseManifest(bytes, path);
}

Status RecordGlobal(os::FileSystem* fs, const Config& config, const std::string& root,
                    const std::string& name, const Manifest& shape, int64_t committed,
                    int64_t persistent) {
  if (fs == nullptr) fs = os::FileSystem::Default();
  const std::string dir = root + "/" + name;
  const std::string path = dir + "/global";
  // A damaged manifest is replaced: it only ever records what the ranks
  // agree on again at their next collective call. One of another job shape
  // is replaced too: this job's commits are the directory's newest.
  std::optional<Current> cur;
  if (auto bytes = ReadSmallFile(fs, path); bytes.ok()) {
    if (auto parsed = Parse(*bytes, path); parsed.ok()) cur = *parsed;
  }
  if (cur && (cur->m.ranks != shape.ranks || cur->m.ranks_per_node != shape.ranks_per_node)) cur.reset();
  Manifest m = shape;
  m.committed = m.persistent = -1;
  if (cur) {
    if (committed <= cur->m.committed && persistent <= cur->m.persistent) return Status::Ok();
    m = cur->m;
  }
  m.committed = std::max(m.committed, committed);
  m.persistent = std::max(m.persistent, persistent);
  Status s = cur && cur->version == 2 ? Overwrite(fs, config, path, *cur, m)
                                      : Create(fs, config, dir, path, m);
  if (!s.ok()) return s.WithContext("recording the global commit of '" + name + "' in " + path);
  return Status::Ok();
}

}  // namespace cairn::collective
