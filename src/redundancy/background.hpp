// Cairn's own progress of a client's redundancy (docs/mpi.md, "Progress"):
// two progress threads (progress_thread.hpp), one for the global commit's
// rounds, one for the partner copies, so that a pass of the copies (chunk
// reads and writes, milliseconds) never delays a round (microseconds), whose
// latency is the global commit's. MPI-free.
#pragma once

#include <memory>

#include "redundancy/global_commit.hpp"
#include "redundancy/levels.hpp"
#include "redundancy/progress_thread.hpp"

namespace cairn::redundancy {

class Background {
 public:
  // Both outlive this object (or its Stop). Starts the threads.
  Background(collective::GlobalCommit* global, Levels* levels)
      : rounds_pass_(global),
        copies_pass_(levels),
        rounds_(&rounds_pass_, ProgressThread::Periods{.slice = collective::GlobalCommit::kSlice}),
        copies_(&copies_pass_, ProgressThread::Periods{}) {}
  // A checkpoint was taken: the next passes now.
  void Kick() {
    rounds_.Kick();
    copies_.Kick();
  }
  // Returns once no pass runs any more; idempotent.
  void Stop() {
    rounds_.Stop();
    copies_.Stop();
  }

 private:
  class RoundsPass final : public ProgressThread::Pass {
   public:
    explicit RoundsPass(collective::GlobalCommit* global) : global_(global) {}
    Pace Run() override {
      global_->Progress();
      return global_->Pace();
    }

   private:
    collective::GlobalCommit* const global_;
  };
  class CopiesPass final : public ProgressThread::Pass {
   public:
    explicit CopiesPass(Levels* levels) : levels_(levels) {}
    Pace Run() override { return levels_->Progress(); }

   private:
    Levels* const levels_;
  };

  RoundsPass rounds_pass_;
  CopiesPass copies_pass_;
  // Last: their threads stop before the passes go.
  ProgressThread rounds_;
  ProgressThread copies_;
};

}  // namespace cairn::redundancy
