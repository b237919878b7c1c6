// The RTM workflow: model a shot (receiver data minus the direct wave), then
// migrate it: forward pass (source wavefield, snapshots pushed into a
// SnapshotStore), backward pass (receiver data back-propagated, snapshots
// popped in reverse, zero-lag cross-correlation), Laplacian filter.
#pragma once

#include <cairn/status.hpp>
#include <cstdint>
#include <vector>

#include "model.hpp"
#include "snapshots.hpp"
#include "wave.hpp"

namespace rtm {

struct Acquisition {
  int src_x = 0;     // interior column of the source
  int depth = 0;     // interior row of the source and of the receiver line
  int nt = 0;        // time steps
  float dt = 0;      // s
  float f0 = 0;      // Ricker peak frequency, Hz
  float t0 = 0;      // Ricker delay, s
};

// Receiver data: nt rows of grid.nx samples (one receiver per interior column).
struct ShotRecord {
  int nt = 0, nrec = 0;
  std::vector<float> data;
  float* row(int n) { return data.data() + static_cast<size_t>(n) * nrec; }
  const float* row(int n) const { return data.data() + static_cast<size_t>(n) * nrec; }
};

// Records the shot in `model`. Called with the true model and with the
// constant surface-velocity model; their difference is the reflection data.
ShotRecord ModelShot(const Model& model, const Acquisition& acq);
void Subtract(ShotRecord& a, const ShotRecord& b);

struct MigrationTimes {
  double forward_s = 0, backward_s = 0;                  // wall time of each pass
  double forward_blocked_s = 0, backward_blocked_s = 0;  // inside Push / Pop
  int64_t snapshots = 0;
  uint64_t snapshot_bytes = 0;  // one snapshot
};

// Migrates `shot` in `model` (the smoothed model). Pushes u every
// `snapshot_every` steps into `store` and pops them back. `image` receives
// grid.nx * grid.nz samples (interior, row-major, z down): the
// source-illumination-normalized zero-lag cross-correlation, Laplacian-filtered.
cairn::Status Migrate(const Model& model, const Acquisition& acq, const ShotRecord& shot,
                      int snapshot_every, SnapshotStore& store, std::vector<float>& image,
                      MigrationTimes& times);

// -(d2/dx2 + d2/dz2) of an nx * nz image (2nd order, edges zero): removes the
// low-wavenumber backscattering noise of the zero-lag imaging condition.
void LaplacianFilter(int nx, int nz, std::vector<float>& image);

// Flat-reflector check: for each depth (cells), the row where the envelope of
// the image's depth profile (averaged over columns [x0, x1)) is largest,
// searched within +-window rows.
struct PickedDepth {
  double true_depth = 0;
  int found_depth = 0;
};
std::vector<PickedDepth> PickReflectors(int nx, int nz, const std::vector<float>& image,
                                        const std::vector<double>& depths, int x0, int x1,
                                        int window);

}  // namespace rtm
