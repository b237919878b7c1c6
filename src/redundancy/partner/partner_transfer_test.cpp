// L2 partner copies in the background (partner_transfer.hpp) between two
// members of an in-process group (testing/group/loopback_group.hpp): nothing
// moves before Progress, at most `window` chunks are in flight, the copy
// is stored only once whole and byte-exact, a damaged chunk is detected on
// both sides, Finish completes what no wait asked for, and a transport
// error on one member ends the waits and the close of both.
#include "redundancy/partner/partner_transfer.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <thread>

#include "cairn/cairn.hpp"
#include "format/naming.hpp"
#include "testing/fs/gate_fs.hpp"
#include "testing/group/fake_checkpoints.hpp"
#include "testing/group/loopback_group.hpp"
#include "testing/test_util.hpp"

namespace cairn {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

class TransferTest : public test::ScratchDirTest {
 protected:
  TransferTest() : ScratchDirTest("partner_transfer"), hub_(2) {}

  void SetUp() override {
    ScratchDirTest::SetUp();
    for (int r = 0; r < 2; ++r) {
      config_[r] = test::ScratchConfig(tmp_.path() + "/m" + std::to_string(r), 1 * test::kMiB, 64 * test::kKiB);
      groups_[r] = std::make_unique<test::LoopbackGroup>(&hub_, r);
    }
  }

  // Member r commits `version` of "s" (`bytes` of pattern) in its directory.
  void Commit(int r, int64_t version, size_t bytes) {
    auto c = Client::Open(config_[r]);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    std::vector<uint8_t> data(bytes);
    for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(i * 31 + version * 7 + r);
    ASSERT_TRUE((*c)->Protect(0, data.data(), data.size()).ok());
    ASSERT_TRUE((*c)->Checkpoint("s", version).ok());
    ASSERT_TRUE((*c)->Wait("s", version, Level::kLocal).ok());
    ASSERT_TRUE((*c)->Close().ok());
  }

  std::string File(int r, int64_t v) const {
    return config_[r].scratch_dir + "/s/" + format::EntryFileName(format::EntryKind::kCheckpoint, v);
  }
  // Where member `holder` keeps source 1 - holder's copy of v.
  std::string Copy(int holder, int64_t v) const {
    return config_[holder].scratch_dir + "/.partner/rank" + std::to_string(1 - holder) + "/s/" +
           format::EntryFileName(format::EntryKind::kCheckpoint, v);
  }

  void Start(partner::TransferLimits limits, bool committed = true) {
    for (int r = 0; r < 2; ++r) {
      // Every version committed, or none (whose wait fails: "never committed").
      local_[r].newest_local = [committed](const std::string&) {
        return redundancy::Checkpoints::Commit{.version = committed ? INT64_MAX : -1};
      };
      transfers_[r] = std::make_unique<partner::Transfers>(
          groups_[r].get(), partner::MapFromNodes({0, 1}, r), config_[r], &local_[r], limits);
    }
  }

  // Both members commit a version (1 with direct I/O, 2 without: the one
  // returned) whose files are not whole chunks; later transfers use the
  // same I/O.
  int64_t CommitWithDirectIo(bool direct) {
    for (int r = 0; r < 2; ++r) config_[r].direct_io = direct;
    const int64_t v = direct ? 1 : 2;
    Commit(0, v, 150 * 1024 + 7);
    Commit(1, v, 70 * 1024);
    return v;
  }

  // Runs fn(member) on both members at once (they wait for each other).
  std::vector<Status> Both(const std::function<Status(partner::Transfers&)>& fn) {
    std::vector<Status> out(2);
    std::thread other([&] { out[1] = fn(*transfers_[1]); });
    out[0] = fn(*transfers_[0]);
    other.join();
    return out;
  }

  test::LoopbackHub hub_;
  Config config_[2];
  std::unique_ptr<test::LoopbackGroup> groups_[2];
  test::FakeCheckpoints local_[2];  // before transfers_: it outlives them
  std::unique_ptr<partner::Transfers> transfers_[2];
};

TEST_F(TransferTest, ACopyMovesOnlyAtProgressInBoundedChunksAndIsStoredWhole) {
  Commit(0, 1, 300 << 10);
  Commit(1, 1, 200 << 10);
  // A send completes once received, as MPI's large messages do: otherwise
  // the hub would buffer what a source sends while its holder's writes
  // hold it back.
  hub_.rendezvous = true;
  Start({.chunk_bytes = 16 << 10, .window = 2});
  transfers_[0]->Queue("s", 1);
  transfers_[1]->Queue("s", 1);
  EXPECT_EQ(hub_.Unreceived(), 0u);  // queued: nothing sent yet
  transfers_[0]->Progress();         // member 0 starts: its head and `window` chunks
  EXPECT_LE(hub_.Unreceived(), 3u);
  EXPECT_GE(hub_.Unreceived(), 1u);
  // Member 1 takes what is there, but the version is not whole yet.
  transfers_[1]->Progress();
  EXPECT_FALSE(fs::exists(Copy(1, 1)));
  for (int i = 0; i < 4; ++i) {
    transfers_[0]->Progress();
    transfers_[1]->Progress();
    EXPECT_LE(hub_.Unreceived(), 6u);  // each side's head and window, at most
  }
  EXPECT_FALSE(fs::exists(Copy(1, 1)));  // 300 KiB is 19 chunks: not there yet
  for (const Status& s : Both([](partner::Transfers& t) { return t.Complete("s", 1); })) {
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  EXPECT_EQ(Slurp(Copy(1, 1)), Slurp(File(0, 1)));
  EXPECT_EQ(Slurp(Copy(0, 1)), Slurp(File(1, 1)));
  EXPECT_EQ(transfers_[0]->copies(), 1u);
  for (const Status& s : Both([](partner::Transfers& t) { return t.Finish(); })) EXPECT_TRUE(s.ok()) << s.ToString();
}

// The holder makes a whole copy durable (fsync, renames, the directory's
// fsync) on its store thread: while that is held at the directory's fsync,
// both members' Progress calls go on returning, and the source hears
// nothing (a copy counts only once durable); once released, the wait
// completes and the copy is whole. (With the store on the caller's thread,
// the holder's Progress would sit at the gate: the bounded wait fails.)
TEST_F(TransferTest, TheHolderMakesACopyDurableOffTheProgressThread) {
  Commit(0, 1, 100 << 10);
  Commit(1, 1, 100 << 10);
  test::GateFs gate(".partner/rank0/");  // member 1's copy of member 0's files
  gate.GateSyncDirInstead();
  test::GateRelease release{&gate};  // whatever fails below, nothing stays at the gate
  config_[1].fs = &gate;
  config_[1].fsync = true;
  Start({.chunk_bytes = 16 << 10, .window = 2});
  transfers_[0]->Queue("s", 1);
  transfers_[1]->Queue("s", 1);
  auto pumping = std::async(std::launch::async, [&] {
    while (!gate.WaitBlocked(std::chrono::milliseconds(0))) {
      transfers_[0]->Progress();
      transfers_[1]->Progress();
      std::this_thread::yield();
    }
    for (int i = 0; i < 100; ++i) {  // the store is held: calls go on
      transfers_[0]->Progress();
      transfers_[1]->Progress();
    }
  });
  const bool returned = pumping.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
  EXPECT_TRUE(returned) << "Progress waited for the holder's fsync";
  EXPECT_EQ(transfers_[0]->copies(), 0u);  // not acknowledged before it is durable
  gate.Release();
  pumping.wait();
  for (const Status& s : Both([](partner::Transfers& t) { return t.Complete("s", 1); })) {
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  EXPECT_EQ(transfers_[0]->copies(), 1u);
  EXPECT_EQ(Slurp(Copy(1, 1)), Slurp(File(0, 1)));
  for (const Status& s : Both([](partner::Transfers& t) { return t.Finish(); })) EXPECT_TRUE(s.ok()) << s.ToString();
  for (auto& t : transfers_) t.reset();  // before the gate goes (config_[1].fs)
}

TEST_F(TransferTest, ADamagedChunkInFlightIsDetectedAndNothingIsStored) {
  Commit(0, 1, 100 << 10);
  Commit(1, 1, 100 << 10);
  Start({.chunk_bytes = 16 << 10, .window = 2});
  int data_from_0 = 0;
  hub_.damage = [&](int from, int, int tag, std::vector<uint8_t>& msg) {
    // The third data message of member 0: its second chunk (after the head).
    if (from == 0 && tag == partner::Transfers::kDataTag && ++data_from_0 == 3) msg[100] ^= 0x04;
  };
  transfers_[0]->Queue("s", 1);
  transfers_[1]->Queue("s", 1);
  auto out = Both([](partner::Transfers& t) { return t.Complete("s", 1); });
  EXPECT_EQ(out[1].code(), Code::kCorrupt) << out[1].ToString();
  EXPECT_NE(out[1].message().find("chunk 1 of version 1"), std::string::npos) << out[1].ToString();
  EXPECT_EQ(out[0].code(), Code::kCorrupt) << out[0].ToString();
  EXPECT_NE(out[0].message().find("rank 1 could not store it"), std::string::npos) << out[0].ToString();
  EXPECT_FALSE(fs::exists(Copy(1, 1)));
  EXPECT_TRUE(fs::exists(Copy(0, 1)));  // the other direction was not damaged
  for (const auto& e : fs::directory_iterator(fs::path(Copy(1, 1)).parent_path()))
    ADD_FAILURE() << "left behind: " << e.path();
  EXPECT_EQ(transfers_[0]->copies(), 0u);
  for (const Status& s : Both([](partner::Transfers& t) { return t.Finish(); })) EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST_F(TransferTest, FinishCompletesWhatNoWaitAskedFor) {
  Commit(0, 1, 40 << 10);
  Commit(1, 1, 40 << 10);
  Commit(0, 2, 40 << 10);
  Commit(1, 2, 40 << 10);
  Start({.chunk_bytes = 16 << 10, .window = 1});
  for (auto& t : transfers_) {
    t->Queue("s", 1);
    t->Queue("s", 2);
  }
  for (const Status& s : Both([](partner::Transfers& t) { return t.Finish(); })) EXPECT_TRUE(s.ok()) << s.ToString();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(Slurp(Copy(r, 2)), Slurp(File(1 - r, 2)));
    EXPECT_EQ(transfers_[r]->copies(), 2u);
  }
  EXPECT_EQ(hub_.Unreceived(), 0u);
  EXPECT_TRUE(transfers_[0]->Finish().ok());  // once is enough
}

TEST_F(TransferTest, AVersionNeverCommittedFailsAtFinishWithoutHanging) {
  Start({.chunk_bytes = 16 << 10, .window = 2}, /*committed=*/false);
  transfers_[0]->Queue("s", 7);
  transfers_[0]->Progress();  // waits for the local commit: nothing sent
  EXPECT_EQ(hub_.Unreceived(), 0u);
  auto out = Both([](partner::Transfers& t) { return t.Finish(); });
  EXPECT_EQ(out[0].code(), Code::kNotFound) << out[0].ToString();
  EXPECT_TRUE(out[1].ok()) << out[1].ToString();
}

// The copy reads and writes with O_DIRECT where the configuration asks for
// direct I/O (Cairn's files are whole blocks), buffered otherwise: the same
// bytes either way, chains across chunk boundaries included.
TEST_F(TransferTest, DirectAndBufferedCopiesAreTheSameBytes) {
  for (bool direct : {true, false}) {
    SCOPED_TRACE(direct ? "direct" : "buffered");
    const int64_t v = CommitWithDirectIo(direct);
    Start({.chunk_bytes = 16 << 10, .window = 2});
    transfers_[0]->Queue("s", v);
    transfers_[1]->Queue("s", v);
    for (const Status& s : Both([](partner::Transfers& t) { return t.Finish(); }))
      EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(Slurp(Copy(1, v)), Slurp(File(0, v)));
    EXPECT_EQ(Slurp(Copy(0, v)), Slurp(File(1, v)));
    for (auto& t : transfers_) t.reset();
  }
}

// The source takes what its host cache holds of a version's file
// (Checkpoints::CopyCached) and reads only the rest from the file: here the
// "cache" serves every other 4 KiB block, and one range inside a block,
// from the bytes as committed, and the file's data on disk is then spoiled
// in those ranges. The copy is the committed bytes, with direct I/O
// (a gap inside a block reads the whole block) and without.
TEST_F(TransferTest, ACopyTakesWhatTheHostCacheHoldsAndReadsTheRest) {
  for (bool direct : {true, false}) {
    SCOPED_TRACE(direct ? "direct" : "buffered");
    const int64_t v = CommitWithDirectIo(direct);
    const std::vector<uint8_t> committed = Slurp(File(0, v));
    // Served: even blocks, and bytes 100..299 of every odd one.
    auto served = [](uint64_t i) {
      return (i / 4096) % 2 == 0 || (i % 4096 >= 100 && i % 4096 < 300);
    };
    uint64_t from_cache = 0;
    local_[0].copy_cached = [&](const std::string& name, int64_t number, uint64_t offset,
                                uint64_t bytes, uint8_t* dst) {
      EXPECT_EQ(name, "s");
      EXPECT_EQ(number, v);
      ExtentList gaps;
      for (uint64_t i = offset; i < offset + bytes; ++i) {
        if (served(i)) {
          dst[i - offset] = committed[i];
          ++from_cache;
        } else {
          AppendExtent(gaps, i, 1);
        }
      }
      return gaps;
    };
    {
      // Only data: opening the chain reads the header and the tables.
      std::vector<uint8_t> spoiled = committed;
      for (uint64_t i = 4096; i < spoiled.size() / 2; ++i) {
        if (served(i)) spoiled[i] ^= 0x5A;
      }
      std::ofstream out(File(0, v), std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(spoiled.data()),
                static_cast<std::streamsize>(spoiled.size()));
    }
    Start({.chunk_bytes = 16 << 10, .window = 2});
    transfers_[0]->Queue("s", v);
    transfers_[1]->Queue("s", v);
    for (const Status& s : Both([](partner::Transfers& t) { return t.Finish(); }))
      EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(Slurp(Copy(1, v)), committed);
    EXPECT_GT(from_cache, committed.size() / 3);
    EXPECT_EQ(Slurp(Copy(0, v)), Slurp(File(1, v)));
    for (auto& t : transfers_) t.reset();
    local_[0].copy_cached = nullptr;
  }
}

// Member 0's version 1 before its local commit: planned, its blocks in the
// host cache, its head and tail (the header and tables, here the first and
// the last 4 KiB) only in the file once committed.
class EarlyTransferTest : public TransferTest {
 protected:
  void SetUp() override {
    TransferTest::SetUp();
    Commit(0, 1, 100 << 10);
    Commit(1, 1, 100 << 10);
    file_ = Slurp(File(0, 1));
    Start({.chunk_bytes = 16 << 10, .window = 2});
    test::FakeCheckpoints& local = local_[0];
    local.newest_local = [this](const std::string&) {
      return redundancy::Checkpoints::Commit{.version = outcome_.ok() && committed_ ? 1 : -1};
    };
    local.wait_local = [this](const std::string&, int64_t) {
      return outcome_.ok() && committed_ ? Status::Ok() : Status::Io("not now");
    };
    local.committed_locally = [this](const std::string&, int64_t) -> Result<bool> {
      if (!outcome_.ok()) return outcome_;
      return committed_.load();
    };
    local.planned_file_bytes = [this](const std::string&, int64_t) -> Result<uint64_t> {
      return file_.size();
    };
    local.copy_cached = [this](const std::string&, int64_t, uint64_t offset, uint64_t bytes,
                               uint8_t* dst) {
      ExtentList gaps;
      for (uint64_t i = offset; i < offset + bytes; ++i) {
        if (i < 4096 || i >= file_.size() - 4096) {
          AppendExtent(gaps, i, 1);
        } else {
          dst[i - offset] = file_[i];
        }
      }
      return gaps;
    };
    hub_.damage = [this](int from, int, int tag, std::vector<uint8_t>&) {
      if (from == 0 && tag == partner::Transfers::kDataTag) ++sent_by_0_;
    };
  }
  // Both members' Progress, until member 0 sends nothing more.
  void ProgressUntilQuiet() {
    int before = -1;
    while (before != sent_by_0_) {
      before = sent_by_0_;
      for (int i = 0; i < 4; ++i) {
        transfers_[0]->Progress();
        transfers_[1]->Progress();
      }
    }
  }

  std::vector<uint8_t> file_;
  std::atomic<bool> committed_{false};
  Status outcome_;  // of the local commit
  int sent_by_0_ = 0;
};

// The copy goes before the commit, but for the chunks the commit writes:
// the holder then has all but those and stores nothing; after the commit
// they follow, and the copy is the committed file.
TEST_F(EarlyTransferTest, AVersionIsSentBeforeItsLocalCommitSaveWhatTheCommitWrites) {
  transfers_[0]->Queue("s", 1);
  transfers_[1]->Queue("s", 1);
  ProgressUntilQuiet();
  const int chunks = static_cast<int>((file_.size() + (16 << 10) - 1) / (16 << 10));
  EXPECT_EQ(sent_by_0_, 1 + chunks - 2);  // the head, the chunks but the first and the last
  EXPECT_FALSE(fs::exists(Copy(1, 1)));
  committed_ = true;
  for (const Status& s : Both([](partner::Transfers& t) { return t.Complete("s", 1); }))
    EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(sent_by_0_, 1 + chunks);
  EXPECT_EQ(Slurp(Copy(1, 1)), file_);
  for (const Status& s : Both([](partner::Transfers& t) { return t.Finish(); }))
    EXPECT_TRUE(s.ok()) << s.ToString();
}

// The local commit fails after the copy began: the source withdraws the
// version, the holder drops what it received (no file left behind) and
// both waits say why; the other direction is not touched.
TEST_F(EarlyTransferTest, AVersionWhoseLocalCommitFailsIsWithdrawn) {
  transfers_[0]->Queue("s", 1);
  transfers_[1]->Queue("s", 1);
  ProgressUntilQuiet();
  outcome_ = Status::Io("the local disk failed");
  auto out = Both([](partner::Transfers& t) { return t.Complete("s", 1); });
  EXPECT_EQ(out[0].code(), Code::kIo) << out[0].ToString();
  EXPECT_NE(out[0].message().find("the local disk failed"), std::string::npos) << out[0].ToString();
  EXPECT_EQ(out[1].code(), Code::kState) << out[1].ToString();
  EXPECT_NE(out[1].message().find("rank 0 withdrew its copy of version 1"), std::string::npos)
      << out[1].ToString();
  EXPECT_FALSE(fs::exists(Copy(1, 1)));
  for (const auto& e : fs::directory_iterator(fs::path(Copy(1, 1)).parent_path()))
    ADD_FAILURE() << "left behind: " << e.path();
  EXPECT_EQ(Slurp(Copy(0, 1)), Slurp(File(1, 1)));
  for (const Status& s : Both([](partner::Transfers& t) { return t.Finish(); }))
    EXPECT_TRUE(s.ok()) << s.ToString();
}

// Back-pressure: while the application captures or restores, Progress
// moves no chunk (neither side: the source does not read and send, the
// holder does not receive and write), and a wait, which the application
// sits in, moves them all the same.
TEST_F(TransferTest, WhileTheApplicationIsBusyProgressMovesNothingButAWaitDoes) {
  Commit(0, 1, 100 << 10);
  Commit(1, 1, 100 << 10);
  Start({.chunk_bytes = 16 << 10, .window = 2});
  local_[0].busy = true;
  local_[1].busy = true;
  transfers_[0]->Queue("s", 1);
  transfers_[1]->Queue("s", 1);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(transfers_[0]->Progress(), redundancy::Pace::kWaiting);
    EXPECT_EQ(transfers_[1]->Progress(), redundancy::Pace::kWaiting);
  }
  EXPECT_EQ(hub_.Unreceived(), 0u);
  // Member 0's application is done: its head and a window go out, and
  // member 1, still busy, takes none of them.
  local_[0].busy = false;
  transfers_[0]->Progress();
  const size_t sent = hub_.Unreceived();
  EXPECT_GE(sent, 1u);
  transfers_[1]->Progress();
  EXPECT_EQ(hub_.Unreceived(), sent);
  local_[0].busy = true;
  for (const Status& s : Both([](partner::Transfers& t) { return t.Complete("s", 1); })) {
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  EXPECT_EQ(Slurp(Copy(1, 1)), Slurp(File(0, 1)));
  EXPECT_EQ(Slurp(Copy(0, 1)), Slurp(File(1, 1)));
  for (const Status& s : Both([](partner::Transfers& t) { return t.Finish(); }))
    EXPECT_TRUE(s.ok()) << s.ToString();
}

// A version committed before this client opened (NewestLocal knows none of
// its commits: a recovery's older versions): QueueCommitted sends it at the
// next Progress without a local commit to wait for, and a file retention
// deleted meanwhile is skipped without an error.
TEST_F(TransferTest, AVersionCommittedBeforeTheClientOpenedIsSentWithoutWaitingForACommit) {
  Commit(0, 1, 40 << 10);
  Commit(0, 2, 40 << 10);
  Start({.chunk_bytes = 16 << 10, .window = 2}, /*committed=*/false);
  fs::remove(File(0, 1));
  transfers_[0]->QueueCommitted("s", 2);
  transfers_[0]->QueueCommitted("s", 1);
  transfers_[0]->Progress();  // starts at once: the head and a window of chunks
  EXPECT_GE(hub_.Unreceived(), 1u);
  for (const Status& s : Both([](partner::Transfers& t) { return t.Finish(); }))
    EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(Slurp(Copy(1, 2)), Slurp(File(0, 2)));
  EXPECT_FALSE(fs::exists(Copy(1, 1)));
  EXPECT_EQ(transfers_[0]->copies(), 1u);
}

// Member 0's transport fails at its second chunk, after member 1 began
// receiving the version: member 0 stops, and its abort notice ends what
// member 1 waits for from it (the rest of the version, its end message, the
// ack of member 1's own copy). Without the notice member 1's close waits
// forever (the ctest timeout catches it). Deterministic: the loopback's
// sends complete at once, so member 0 sends its head and chunk 0 at its
// first Progress (window 1) and chunk 1 at the next.
class TransferErrorTest : public TransferTest {
 protected:
  void Break() {
    Commit(0, 1, 100 << 10);
    Commit(1, 1, 100 << 10);
    Start({.chunk_bytes = 16 << 10, .window = 1});
    hub_.fail_send = [this](int from, int, int tag) {
      // Only member 0's thread counts (from == 0).
      if (from == 0 && tag == partner::Transfers::kDataTag && ++data_from_0_ == 3) {
        return Status::Io("injected transport error");
      }
      return Status::Ok();
    };
    transfers_[0]->Queue("s", 1);
    transfers_[1]->Queue("s", 1);
    transfers_[0]->Progress();  // head, chunk 0
    transfers_[1]->Progress();  // member 1 takes them: a copy half received
    ASSERT_EQ(data_from_0_, 2);
  }
  void ExpectBothFailed(const std::vector<Status>& out) {
    EXPECT_EQ(out[0].code(), Code::kIo) << out[0].ToString();
    EXPECT_NE(out[0].message().find("injected transport error"), std::string::npos) << out[0].ToString();
    EXPECT_EQ(out[1].code(), Code::kIo) << out[1].ToString();
    EXPECT_NE(out[1].message().find("rank 0 stopped its partner copies"), std::string::npos)
        << out[1].ToString();
  }
  // Member 1 dropped the half-received copy: no file, no temp file.
  void ExpectNothingLeftAt1() {
    EXPECT_FALSE(fs::exists(Copy(1, 1)));
    for (const auto& e : fs::directory_iterator(fs::path(Copy(1, 1)).parent_path()))
      ADD_FAILURE() << "left behind: " << e.path();
  }
  int data_from_0_ = 0;
};

TEST_F(TransferErrorTest, ATransportErrorOnOneSideEndsBothSidesClose) {
  Break();
  ExpectBothFailed(Both([](partner::Transfers& t) { return t.Finish(); }));
  ExpectNothingLeftAt1();
  EXPECT_EQ(transfers_[1]->copies(), 0u);  // member 0 never acknowledged
}

TEST_F(TransferErrorTest, ATransportErrorOnOneSideEndsBothSidesWaitThenClose) {
  Break();
  ExpectBothFailed(Both([](partner::Transfers& t) { return t.Complete("s", 1); }));
  ExpectNothingLeftAt1();
  auto closed = Both([](partner::Transfers& t) { return t.Finish(); });
  EXPECT_EQ(closed[0].code(), Code::kIo) << closed[0].ToString();
  EXPECT_EQ(closed[1].code(), Code::kIo) << closed[1].ToString();
}

// MPI reads a send's buffer until the send completed, and a large message
// completes only once the receiver took it (rendezvous). Member 1's chunk 0
// is in flight to member 0 when member 0 stops (its transport fails), so
// member 0 never takes it and it never completes: member 1 must keep that
// request and its buffer past its close and destruction (a buffer freed
// under the transport is what corrupted the heap in MPI_Finalize), while
// the close of both still returns.
TEST_F(TransferErrorTest, ASendThatNeverCompletesIsNeverFreed) {
  hub_.rendezvous = true;
  Break();
  ExpectBothFailed(Both([](partner::Transfers& t) { return t.Finish(); }));
  EXPECT_GE(hub_.Unreceived(), 1u);  // member 1's chunk, never taken
  transfers_[0].reset();
  transfers_[1].reset();
  EXPECT_EQ(hub_.sends_dropped.load(), 0);
}

// The same with sends that complete only when matched, without an error:
// every request completes or is withdrawn by Finish, nothing is kept.
TEST_F(TransferTest, WithRendezvousSendsEveryRequestCompletesByFinish) {
  hub_.rendezvous = true;
  Commit(0, 1, 100 << 10);
  Commit(1, 1, 100 << 10);
  Start({.chunk_bytes = 16 << 10, .window = 2});
  transfers_[0]->Queue("s", 1);
  transfers_[1]->Queue("s", 1);
  auto out = Both([](partner::Transfers& t) { return t.Complete("s", 1); });
  EXPECT_TRUE(out[0].ok()) << out[0].ToString();
  EXPECT_TRUE(out[1].ok()) << out[1].ToString();
  out = Both([](partner::Transfers& t) { return t.Finish(); });
  EXPECT_TRUE(out[0].ok()) << out[0].ToString();
  EXPECT_TRUE(out[1].ok()) << out[1].ToString();
  EXPECT_EQ(hub_.Unreceived(), 0u);
  EXPECT_EQ(Slurp(Copy(1, 1)), Slurp(File(0, 1)));
  transfers_[0].reset();
  transfers_[1].reset();
  EXPECT_EQ(hub_.sends_dropped.load(), 0);
}

}  // namespace
}  // namespace cairn
