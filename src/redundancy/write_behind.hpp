// Rounds of buffers filled by one thread and consumed in order by another,
// up to `depth` rounds behind: the lost member of an XOR rebuild receives
// round r + 1 while it checks and writes rounds r, r - 1, ...
// (xor_rebuild.cpp; docs/mpi.md "Measuring a rebuild"). With one round of
// slack the receiving and the writing went in lockstep, so a round whose
// write was slow (the device, the scheduler) held up the whole set; a few
// rounds of slack let either side run ahead while the other catches up.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "util/mutex.hpp"
#include "util/thread_annotations.hpp"

namespace cairn::redundancy {

class WriteBehind {
 public:
  using Round = std::vector<std::vector<uint8_t>>;
  // consume(round, r) runs for each pushed round, in order, on a thread of
  // its own (or in Push when no thread could be started).
  WriteBehind(size_t depth, std::function<void(const Round&, uint64_t)> consume);
  ~WriteBehind();  // Finish()
  WriteBehind(const WriteBehind&) = delete;
  WriteBehind& operator=(const WriteBehind&) = delete;

  // The buffers of the next round to fill; waits while `depth` rounds are
  // pushed and not yet consumed.
  Round* Next();
  // The round Next() returned is filled: it is round r.
  void Push(uint64_t r);
  // Waits until every pushed round is consumed. After it, the consumer's
  // state may be read (the thread is joined).
  void Finish();

 private:
  void Run();

  const std::function<void(const Round&, uint64_t)> consume_;
  Mutex mu_;
  std::condition_variable_any cv_;
  std::vector<Round> rounds_;    // slot k % depth is the k-th pushed round
  std::vector<uint64_t> number_;  // each slot's r
  uint64_t pushed_ CAIRN_GUARDED_BY(mu_) = 0;
  uint64_t consumed_ CAIRN_GUARDED_BY(mu_) = 0;
  bool finishing_ CAIRN_GUARDED_BY(mu_) = false;
  std::jthread thread_;  // last: started once the rest exists
};

}  // namespace cairn::redundancy
