#include "models/touch_model.hpp"

#include <algorithm>

namespace cairn::core {

const char* ModeName(TouchModel::Mode mode) {
  return mode == TouchModel::Mode::kConcurrent ? "concurrent" : "sequential";
}

void TouchModel::OnTouch(uint64_t bytes, double seconds, bool during_capture) {
  if (bytes == 0 || seconds <= 0) return;
  (during_capture ? touch_during_ : touch_between_).Add(static_cast<double>(bytes) / seconds);
  (during_capture ? cycle_during_ : cycle_between_) += static_cast<double>(bytes);
}

void TouchModel::OnCaptureCopy(uint64_t bytes, double seconds, bool into_touched, bool touching) {
  if (bytes == 0 || seconds <= 0) return;
  (into_touched ? write_touched_ : write_untouched_)[touching ? 1 : 0].Add(
      static_cast<double>(bytes) / seconds);
}

void TouchModel::OnCapture(uint64_t bytes, double seconds, double interval_s, bool touching_allowed) {
  size_.Add(static_cast<double>(bytes));
  duration_.Add(seconds);
  if (interval_s >= 0) {
    interval_.Add(interval_s);
    // Before the first capture there is no cycle: touching ran from open on.
    yield_between_.Add(cycle_between_);
    if (touching_allowed) yield_during_.Add(cycle_during_);
  }
  cycle_between_ = cycle_during_ = 0;
  const int i = Index(touching_allowed ? Mode::kConcurrent : Mode::kSequential);
  if (!write_untouched_[i].set) ++untouched_tries_[i];
}

double TouchModel::TouchedAhead(Mode mode, uint64_t reserve_bytes) const {
  if (!size_.set || !interval_.set) return -1;
  const Ewma& ti = touch_between_.set ? touch_between_ : touch_during_;
  const Ewma& tc = touch_during_.set ? touch_during_ : touch_between_;
  if (!yield_between_.set && !ti.set) return -1;
  double x = static_cast<double>(reserve_bytes) +
             (yield_between_.set ? yield_between_.value : ti.value * interval_.value);
  if (mode == Mode::kConcurrent) {
    if (yield_during_.set) {
      x += yield_during_.value;
    } else if (tc.set) {
      x += tc.value * duration_.value;
    }
  }
  return x;
}

bool TouchModel::BorrowsUntouchedRate(Mode mode) const {
  const int i = Index(mode);
  return !write_untouched_[i].set && write_untouched_[1 - i].set &&
         untouched_tries_[i] < kUntouchedTries && TouchedAhead(mode, 0) < size_.value;
}

double TouchModel::PredictBlocking(Mode mode, uint64_t reserve_bytes) const {
  const double x = TouchedAhead(mode, reserve_bytes);
  if (x < 0) return -1;
  const double s = size_.value;
  // Rates not measured yet borrow their counterpart of the other mode: a
  // touched write never measured alone is assumed as fast as the contended
  // one, and so on.
  const Ewma& w = OwnOrOther(write_touched_, mode);  // Wt or Wc
  if (!w.set) return -1;
  if (x >= s) return s / w.value;  // all of it lands in touched memory
  // Part of it lands in untouched memory: that rate is needed. It is
  // measured only once a capture outruns the touching, which the model must
  // not wait for when touching keeps ahead (it never would be).
  const Ewma& w_untouched = OwnOrOther(write_untouched_, mode);  // Wu or Wv
  if (!w_untouched.set) return -1;
  return x / w.value + (s - x) / w_untouched.value;
}

TouchModel::Mode TouchModel::Decide(Mode current) const {
  const double seq = PredictBlocking(Mode::kSequential, 0);
  const double conc = PredictBlocking(Mode::kConcurrent, 0);
  if (seq < 0 || conc < 0) return Mode::kConcurrent;  // still measuring
  // A mode priced with the other mode's untouched rate is tried (for up to
  // kUntouchedTries captures): the borrowed rate may be far off.
  if (BorrowsUntouchedRate(Mode::kSequential)) return Mode::kSequential;
  if (BorrowsUntouchedRate(Mode::kConcurrent)) return Mode::kConcurrent;
  if (current == Mode::kConcurrent) return seq <= conc ? Mode::kSequential : Mode::kConcurrent;
  return conc < 0.95 * seq ? Mode::kConcurrent : Mode::kSequential;
}

}  // namespace cairn::core
