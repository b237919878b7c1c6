// The redundancy levels of a client in a group (levels.hpp, docs/mpi.md).
#include "redundancy/levels.hpp"

#include <cstdio>
#include <memory>

#include "redundancy/collective.hpp"
#include "redundancy/redundancy.hpp"
#include "format/chain.hpp"
#include "util/clock.hpp"
#include "util/log.hpp"

namespace cairn::redundancy {

Result<Plan> AgreePlan(Group& group, const Config& config) {
  // The settings are configuration keys (mpi.*), valid by now and the same
  // on every member (CheckConfigsAgree); what they derive from the group
  // (partners, sets) is checked here, alike on every member.
  Plan plan{.l2_every = config.l2_every, .l3_every = config.l3_every, .l4_every = config.l4_every};
  if (plan.l2_every > 0) {
    CAIRN_ASSIGN_OR_RETURN(plan.partner, partner::MakeMap(group));
  }
  if (plan.l3_every > 0) {
    // Derived from every rank's node alike: an error is the same everywhere.
    CAIRN_ASSIGN_OR_RETURN(
        plan.sets, parity::MakeSets(group, config.l3_group, config.l3_code, config.l3_parity));
  }
  if (plan.l4_every > 0 && config.persistent_dir.empty()) {
    return Status::Config("mpi.l4_every (CAIRN_L4_EVERY) is " + std::to_string(plan.l4_every) +
                          ", but no persistent directory is configured (storage.persistent, "
                          "CAIRN_PERSISTENT): L4 writes every such checkpoint there");
  }
  return plan;
}

Levels::Levels(Group* group, Config config, Plan plan, Checkpoints* local,
               partner::TransferLimits limits)
    : group_(group), config_(std::move(config)), plan_(std::move(plan)), local_(local) {
  if (plan_.l2_every > 0 && group_->point_to_point()) {
    transfers_ =
        std::make_unique<partner::Transfers>(group_, plan_.partner, config_, local_, limits);
  }
}

// The encoder first: its thread reports to stats_ and protected_, which
// are declared after it and so would go before it.
Levels::~Levels() { encoder_.reset(); }

void Levels::EncodeInBackground(std::unique_ptr<Group> group) {
  if (!redundant()) return;
  parity::BackgroundEncoder::Listener* listener = this;  // a private base: converted here
  encoder_ = std::make_unique<parity::BackgroundEncoder>(
      std::move(group), plan_.l3_every > 0 ? std::optional(plan_.sets) : std::nullopt,
      plan_.l2_every > 0 ? std::optional(plan_.partner) : std::nullopt, config_, local_, listener);
}

void Levels::EncodingEnded(const parity::BackgroundEncoder::Done& d) {
  if (d.superseded) {
    util::Log(LogLevel::kInfo,
              "the parity (L3) of version %lld of '%s' was skipped: retention removed the "
              "version before its encoding's turn (checkpoints come faster than the encodings)",
              static_cast<long long>(d.version), d.name.c_str());
  } else if (d.status.ok()) {
    Encoded(d.name, d.version, d.bytes, d.seconds, d.end_ns);
  }
}

Protection Levels::Protected(const std::string& name) const {
  Protection p;
  {
    MutexLock lock(&stats_mu_);
    if (auto it = protected_.find(name); it != protected_.end()) p = it->second;
  }
  if (transfers_) p.l2 = transfers_->Acknowledged(name);
  return p;
}

Status Levels::BackgroundError(bool drain) {
  if (!encoder_) return Status::Ok();
  Status s = drain ? encoder_->Drain() : encoder_->TakeError();
  return collective::Agree(*group_, s, "the parity (L3) in the background");
}

void Levels::Checkpointed(const std::string& name, int64_t version, bool ok) {
  MutexLock lock(&turns_mu_);
  // Failed checkpoints too: every member queues the same encodings.
  if (encoder_ && plan_.l3_every > 0 && ++l3_checkpoints_ % plan_.l3_every == 0)
    encoder_->Queue(name, version);
  if (plan_.l2_every <= 0) return;
  if (++checkpoints_ % plan_.l2_every != 0 || !ok) return;
  if (transfers_) {
    transfers_->Queue(name, version);
  } else {
    turns_.Add(name, version);
  }
}

bool Levels::PersistTurn(const std::string& name, int64_t version) {
  if (plan_.l4_every <= 0) return true;
  MutexLock lock(&turns_mu_);
  if (++persist_checkpoints_ % plan_.l4_every != 0) return false;
  l4_turns_.Add(name, version);
  return true;
}

bool Levels::L2Turn(const std::string& name, int64_t version) {
  if (transfers_) return transfers_->Queued(name, version);
  MutexLock lock(&turns_mu_);
  return turns_.Contains(name, version);
}

bool Levels::L4Turn(const std::string& name, int64_t version) {
  MutexLock lock(&turns_mu_);
  return l4_turns_.Contains(name, version);
}

Status Levels::AgreeTurn(bool turn, int level, const std::string& what, const std::string& label) {
  int64_t range[2] = {turn ? 1 : 0, turn ? -1 : 0};
  CAIRN_RETURN_IF_ERROR(group_->AllReduce(Group::Op::kMin, range, 2));
  if (range[0] == -range[1]) return Status::Ok();
  const std::string l = std::string("L").append(std::to_string(level));  // not "L" + (GCC 12 -Wrestrict)
  return Status::State(l + " (" + what + ") of " + label + ": its checkpoint was a turn (CAIRN_" + l +
                       "_EVERY) on some ranks and not on others; every rank must checkpoint the same versions "
                       "in the same order");
}

Pace Levels::Progress() { return transfers_ ? transfers_->Progress() : Pace::kIdle; }

Status Levels::Finish() {
  Status s = encoder_
                 ? encoder_->Drain().WithContext(
                       "completing the parity (L3) and the recoveries of older versions at close")
                 : Status::Ok();
  if (!transfers_) return s;
  Status t = transfers_->Finish().WithContext("completing the partner copies (L2) at close");
  return s.ok() ? t : s;
}

// The wait of an L2 turn returns once the copy is stored at the partner:
// in the background, the transfers queued up to it are completed; else the
// copy is made now. The ranks first check that it is a turn on every one
// of them (they checkpointed the same sequence), so that none waits for a
// copy its partner will never send.
Status Levels::CompleteL2(const std::string& name, int64_t version) {
  const std::string label = "version " + std::to_string(version) + " of '" + name + "'";
  const bool turn = L2Turn(name, version);
  CAIRN_RETURN_IF_ERROR(AgreeTurn(turn, 2, "the partner copy", label));
  if (!turn) return Status::Ok();
  Status s = transfers_ ? transfers_->Complete(name, version)
                        : partner::Replicate(*group_, plan_.partner, config_, name, version);
  CAIRN_RETURN_IF_ERROR(collective::Agree(*group_, s, "the partner copies (L2) of " + label));
  if (!transfers_) {
    Replicated(name, version);
    MutexLock lock(&turns_mu_);
    turns_.Erase(name, version);
  }
  return Status::Ok();
}

void Levels::Replicated(const std::string& name, int64_t version) {
  const int64_t now_ns = RealtimeNs();
  MutexLock lock(&stats_mu_);
  ++stats_.l2_copies;
  protected_[name].l2.Raise(version, now_ns);
}

void Levels::Count(uint64_t MpiStats::*field, uint64_t n) {
  MutexLock lock(&stats_mu_);
  stats_.*field += n;
}

MpiStats Levels::stats() const {
  MutexLock lock(&stats_mu_);
  MpiStats st = stats_;
  if (transfers_) st.l2_copies = transfers_->copies();
  return st;
}

// An explicit wait at kPersistent (on an L4 turn: any other version is not
// in the persistent tier, and the wait said so) makes L4's work a no-op. On
// an L4 turn the persistent copies are waited for FIRST, so that the wait
// records the manifest once, committed and persistent together (docs/mpi.md,
// "CAIRN_L4_EVERY").
Status Levels::AfterWait(const std::string& name, int64_t version, cairn::Level level) {
  const int64_t n = ++waits_;
  const std::string label = "version " + std::to_string(version) + " of '" + name + "'";
  bool persistent = level == cairn::Level::kPersistent;
  bool l4 = false;
  if (plan_.l4_every > 0) {
    l4 = L4Turn(name, version);
    CAIRN_RETURN_IF_ERROR(AgreeTurn(l4, 4, "the persistent copy", label));
  }
  if (!persistent && l4) {
    Status s = local_->WaitPersistent(name, version);
    CAIRN_RETURN_IF_ERROR(collective::Agree(*group_, s, "making " + label + " persistent (CAIRN_L4_EVERY)"));
    Count(&MpiStats::l4_waits);
    persistent = true;
  }
  CAIRN_RETURN_IF_ERROR(local_->RecordGlobal(name, version, persistent ? version : -1));
  if (plan_.l2_every > 0) CAIRN_RETURN_IF_ERROR(CompleteL2(name, version));
  // In the background the checkpoints take the L3 turns (Checkpointed);
  // a failure of an earlier encoding fails this wait.
  if (encoder_) return BackgroundError(false);
  if (plan_.l3_every > 0 && n % plan_.l3_every == 0) return EncodeL3(name, version, label);
  return Status::Ok();
}

Status Levels::EncodeL3(const std::string& name, int64_t version, const std::string& label) {
  const SteadyTime start = std::chrono::steady_clock::now();
  auto bytes = parity::Encode(*group_, plan_.sets, config_, name, version, nullptr, local_);
  CAIRN_RETURN_IF_ERROR(collective::Agree(*group_, bytes.status(), "the parity (L3) of " + label));
  if (*bytes == 0) return Status::Ok();  // superseded (Encode): nothing to protect any more
  const int64_t end_ns = RealtimeNs();
  Encoded(name, version, *bytes, SecondsSince(start), end_ns);
  return Status::Ok();
}

void Levels::Encoded(const std::string& name, int64_t version, uint64_t bytes, double seconds,
                     int64_t end_ns) {
  MutexLock lock(&stats_mu_);
  ++stats_.l3_parity_writes;
  stats_.l3_parity_bytes += bytes;
  stats_.l3_encode_s += seconds;
  protected_[name].l3.Raise(version, end_ns);
}

Status Levels::CheckAsked(const WaitLevels& asked, const std::string& label) const {
  if ((asked.l2 && plan_.l2_every <= 0) || (asked.l3 && plan_.l3_every <= 0)) {
    return Status::Config(std::string("the ") + (asked.l2 && plan_.l2_every <= 0 ? "partner (L2)" : "XOR (L3)") +
                          " level was not set up when this client was opened (mpi.l2_every / mpi.l3_every, "
                          "CAIRN_L2_EVERY / CAIRN_L3_EVERY), so " + label + " cannot get it");
  }
  return Status::Ok();
}

Status Levels::AtLevels(const std::string& name, int64_t version, const WaitLevels& asked) {
  const std::string label = "version " + std::to_string(version) + " of '" + name + "'";
  if (asked.persistent) Count(&MpiStats::l4_waits);
  CAIRN_RETURN_IF_ERROR(local_->RecordGlobal(name, version, asked.persistent ? version : -1));
  if (asked.l2) {
    Status s;
    if (transfers_) {
      // Every member asks for the same version (the ranks make the same
      // call), so every partner queues and sends it alike.
      if (!transfers_->Queued(name, version)) transfers_->Queue(name, version);
      s = transfers_->Complete(name, version);
    } else {
      s = partner::Replicate(*group_, plan_.partner, config_, name, version);
    }
    CAIRN_RETURN_IF_ERROR(collective::Agree(*group_, s, "the partner copies (L2) of " + label));
    if (!transfers_) Replicated(name, version);
  }
  if (asked.l3) {
    // Asked for: waited for, after what the background had queued.
    CAIRN_RETURN_IF_ERROR(BackgroundError(true));
    CAIRN_RETURN_IF_ERROR(EncodeL3(name, version, label));
  }
  return Status::Ok();
}

// Says so (util::Log): which level served the rank matters to whoever reads
// the job's log.
Status Levels::Recover(const std::string& name, int64_t bound, int64_t distrust) {
  if (!redundant()) return Status::Ok();
  // The parity being encoded in the background is what a rebuild reads.
  CAIRN_RETURN_IF_ERROR(BackgroundError(true));
  auto mine = local_->IntactVersions(name);
  CAIRN_RETURN_IF_ERROR(collective::Agree(*group_, mine.status(), "listing the versions of '" + name + "'"));
  std::vector<std::unique_ptr<Level>> owned;
  std::vector<int> kinds;  // 2 or 3, per level
  if (plan_.l2_every > 0) {
    owned.push_back(partner::MakeLevel(*group_, plan_.partner, config_));
    kinds.push_back(2);
  }
  MpiStats phases;  // the l3_*_s of this recovery's rebuild, if any
  if (plan_.l3_every > 0) {
    owned.push_back(parity::MakeLevel(*group_, plan_.sets, config_, &phases));
    kinds.push_back(3);
  }
  std::vector<Level*> levels;
  for (auto& level : owned) levels.push_back(level.get());
  const SteadyTime start = std::chrono::steady_clock::now();
  auto r = redundancy::Recover(*group_, config_, levels, name, *mine, bound, distrust);
  {
    MutexLock lock(&stats_mu_);
    for (double MpiStats::*f : {&MpiStats::l3_read_s, &MpiStats::l3_exchange_s, &MpiStats::l3_xor_s,
                                &MpiStats::l3_crc_s, &MpiStats::l3_write_s, &MpiStats::l3_write_wait_s,
                                &MpiStats::l3_sync_s, &MpiStats::l3_encode_s})
      stats_.*f += phases.*f;
  }
  if (r.ok()) {
    for (const std::string& note : r->notes)
      util::Log(LogLevel::kWarn, "rank %d: %s", group_->rank(), note.c_str());
    if (r->level >= 0) {
      util::Log(LogLevel::kInfo, "rank %d: restored %s", group_->rank(), r->served.c_str());
      const int kind = kinds[static_cast<size_t>(r->level)];
      recovered_[name] = {r->version, kind};
      if (kind == 3) {
        MutexLock lock(&stats_mu_);
        ++stats_.l3_rebuilds;
        // The rebuild without the re-encoding of the rank's own parity
        // that follows it (counted as encoding).
        stats_.l3_rebuild_s += SecondsSince(start) - phases.l3_encode_s;
      }
    }
    if (plan_.l2_every > 0 && r->version >= 0) ResendOlder(name, *owned[0], r->version, *mine);
  }
  CAIRN_RETURN_IF_ERROR(collective::Agree(*group_, r.status(),
                                          "recovering '" + name + "' from the redundancy levels"));
  return RecoverOlder(name, r->version, r->level >= 0);
}

Status Levels::RecoverOlder(const std::string& name, int64_t version, bool served) {
  if (!redundant() || version < 0) return Status::Ok();
  int64_t lost = served ? 1 : 0;  // some member got `version` back from a level
  CAIRN_RETURN_IF_ERROR(group_->AllReduce(Group::Op::kMax, &lost, 1));
  if (lost == 0) return Status::Ok();
  const int older = config_.keep_versions > 0 ? config_.keep_versions - 1 : INT32_MAX;
  if (encoder_) {
    encoder_->QueueOlder(name, version, older);
  } else if (group_->rank() == 0 && older > 0) {
    util::Log(
        LogLevel::kInfo,
        "the versions of '%s' older than %lld that a lost node held come back only as they are "
        "checkpointed again (without Cairn's progress threads, nothing runs in the background)",
        name.c_str(), static_cast<long long>(version));
  }
  return Status::Ok();
}

void Levels::ResendOlder(const std::string& name, const Level& partner, int64_t version,
                         const std::vector<int64_t>& intact) {
  const std::vector<int64_t> older = partner.Older(version, intact);
  if (older.empty()) return;
  std::string list;
  for (int64_t w : older) list += (list.empty() ? "" : ", ") + std::to_string(w);
  // Without background transfers (copies made in the waits only) they come
  // back at their next L2 turns.
  if (transfers_)
    for (int64_t w : older) transfers_->QueueCommitted(name, w);
  util::Log(LogLevel::kInfo,
            "rank %d: versions %s of '%s': rank %d no longer holds their partner copies; %s",
            group_->rank(), list.c_str(), name.c_str(), plan_.partner.partner,
            transfers_ ? "they are sent again in the background (L2)"
                       : "they come back only as they are checkpointed again (no background "
                         "transfers in this group)");
}

void Levels::CountRestore(const std::string& name, int64_t version) {
  auto it = recovered_.find(name);
  if (it != recovered_.end() && it->second.first == version) {
    Count(it->second.second == 2 ? &MpiStats::restored_l2 : &MpiStats::restored_l3);
  } else if (format::Chain::Open(Fs(config_), config_.scratch_dir, name, version).ok()) {
    Count(&MpiStats::restored_local);
  } else {
    Count(&MpiStats::restored_l4);
  }
  if (it != recovered_.end()) recovered_.erase(it);
}

}  // namespace cairn::redundancy
