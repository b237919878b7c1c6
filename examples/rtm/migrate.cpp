#include "migrate.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numbers>

namespace rtm {

namespace {
using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

ShotRecord ModelShot(const Model& model, const Acquisition& acq) {
  const Grid& g = model.grid;
  Propagator prop(model, acq.dt);
  Wavefield w(g.cells());
  ShotRecord rec;
  rec.nt = acq.nt;
  rec.nrec = g.nx;
  rec.data.assign(static_cast<size_t>(acq.nt) * g.nx, 0.0f);
  const size_t src = g.At(acq.src_x, acq.depth);
  const size_t r0 = g.At(0, acq.depth);
  for (int n = 0; n < acq.nt; ++n) {
    prop.Step(w);
    prop.Inject(w, src, Ricker(acq.f0, acq.t0, n * acq.dt));
    std::copy_n(w.cur.data() + r0, g.nx, rec.row(n));
  }
  return rec;
}

void Subtract(ShotRecord& a, const ShotRecord& b) {
  for (size_t i = 0; i < a.data.size(); ++i) a.data[i] -= b.data[i];
}

cairn::Status Migrate(const Model& model, const Acquisition& acq, const ShotRecord& shot,
                      int snapshot_every, SnapshotStore& store, std::vector<float>& image,
                      MigrationTimes& times) {
  const Grid& g = model.grid;
  Propagator prop(model, acq.dt);
  const size_t bytes = g.cells() * sizeof(float);
  times.snapshot_bytes = bytes;
  times.snapshots = 0;
  const size_t src = g.At(acq.src_x, acq.depth);
  const size_t r0 = g.At(0, acq.depth);

  // Forward: u^n is pushed before step n (snapshot "n" is the field at t = n dt).
  Wavefield w(g.cells());
  auto t = Clock::now();
  for (int n = 0; n < acq.nt; ++n) {
    if (n % snapshot_every == 0) {
      const auto b = Clock::now();
      CAIRN_RETURN_IF_ERROR(store.Push(n, w.cur.data(), bytes));
      times.forward_blocked_s += Since(b);
      ++times.snapshots;
    }
    prop.Step(w);
    prop.Inject(w, src, Ricker(acq.f0, acq.t0, n * acq.dt));
  }
  times.forward_s = Since(t);

  // Backward: the receiver wavefield runs from t = (nt-1) dt down to 0, the
  // recorded sample of step n injected at every receiver; at each snapshot
  // time, the popped source field and the receiver field are correlated.
  std::vector<double> corr(static_cast<size_t>(g.nx) * g.nz, 0.0);
  std::vector<double> illum(corr.size(), 0.0);
  std::vector<float> snap(g.cells());
  w.Zero();
  t = Clock::now();
  for (int n = acq.nt - 1; n >= 0; --n) {
    prop.Step(w);
    const float* d = shot.row(n);
    for (int x = 0; x < g.nx; ++x) prop.Inject(w, r0 + x, d[x]);
    if (n % snapshot_every == 0) {
      const auto b = Clock::now();
      CAIRN_RETURN_IF_ERROR(store.Pop(n, snap.data(), bytes));
      times.backward_blocked_s += Since(b);
      for (int z = 0; z < g.nz; ++z) {
        const float* s = snap.data() + g.At(0, z);
        const float* r = w.cur.data() + g.At(0, z);
        double* c = corr.data() + static_cast<size_t>(z) * g.nx;
        double* il = illum.data() + static_cast<size_t>(z) * g.nx;
        for (int x = 0; x < g.nx; ++x) {
          c[x] += static_cast<double>(s[x]) * r[x];
          il[x] += static_cast<double>(s[x]) * s[x];
        }
      }
    }
  }
  times.backward_s = Since(t);

  // Source-illumination normalization (stabilized by 1e-3 of the peak), then
  // the Laplacian filter.
  const double peak = *std::max_element(illum.begin(), illum.end());
  const double eps = 1e-3 * peak + 1e-30;
  image.assign(corr.size(), 0.0f);
  for (size_t i = 0; i < corr.size(); ++i) image[i] = static_cast<float>(corr[i] / (illum[i] + eps));
  LaplacianFilter(g.nx, g.nz, image);
  return cairn::Status::Ok();
}

void LaplacianFilter(int nx, int nz, std::vector<float>& image) {
  std::vector<float> out(image.size(), 0.0f);
  for (int z = 1; z < nz - 1; ++z) {
    for (int x = 1; x < nx - 1; ++x) {
      const size_t i = static_cast<size_t>(z) * nx + x;
      out[i] = 4.0f * image[i] - image[i - 1] - image[i + 1] - image[i - nx] - image[i + nx];
    }
  }
  image.swap(out);
}

std::vector<PickedDepth> PickReflectors(int nx, int nz, const std::vector<float>& image,
                                        const std::vector<double>& depths, int x0, int x1,
                                        int window) {
  // Signed depth profile averaged over the traces, then its envelope
  // sqrt(p^2 + H(p)^2) (H: discrete Hilbert transform, kernel 2/(pi k) for
  // odd k): the reflector's image is a band-limited wavelet whose phase is not
  // zero (the 2-D Green's functions add 45 degrees on each leg), so the
  // envelope, not |image|, peaks at the interface.
  std::vector<double> profile(nz, 0.0);
  x0 = std::clamp(x0, 0, nx);
  x1 = std::clamp(x1, x0, nx);
  for (int z = 0; z < nz; ++z) {
    double s = 0;
    for (int x = x0; x < x1; ++x) s += image[static_cast<size_t>(z) * nx + x];
    profile[z] = x1 > x0 ? s / (x1 - x0) : 0.0;
  }
  std::vector<double> envelope(nz, 0.0);
  for (int z = 0; z < nz; ++z) {
    double h = 0;
    for (int k = -nz + 1; k < nz; k += 1) {
      if ((k & 1) == 0 || z - k < 0 || z - k >= nz) continue;
      h += 2.0 / (std::numbers::pi * k) * profile[z - k];
    }
    envelope[z] = std::hypot(profile[z], h);
  }
  std::vector<PickedDepth> picks;
  for (double d : depths) {
    const int c = static_cast<int>(std::floor(d));
    const int lo = std::max(0, c - window), hi = std::min(nz - 1, c + window);
    int best = lo;
    for (int z = lo; z <= hi; ++z)
      if (envelope[z] > envelope[best]) best = z;
    picks.push_back({d, best});
  }
  return picks;
}

}  // namespace rtm
