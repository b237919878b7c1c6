// The finite-difference kernel of the RTM demo: the 2-D constant-density
// acoustic wave equation u_tt = v^2 (u_xx + u_zz), second order in time,
// fourth order in space, with a Cerjan sponge (absorbing layer) in the padded
// cells, and the Ricker wavelet used as the source.
#pragma once

#include <vector>

#include "model.hpp"

namespace rtm {

// Two time levels of a wavefield over the padded grid.
struct Wavefield {
  std::vector<float> cur, prev;
  explicit Wavefield(size_t cells) : cur(cells, 0.0f), prev(cells, 0.0f) {}
  void Zero();
};

class Propagator {
 public:
  // dt must satisfy StableDt(); the sponge covers the grid's pad cells.
  Propagator(const Model& model, float dt);

  // Largest stable dt for the 4th-order scheme is sqrt(3/8) dx / vmax; this
  // returns `courant` times dx / vmax (0.45 leaves a safe margin).
  static float StableDt(const Model& model, float courant = 0.45f);

  // Advances one step: u^{n+1} = 2u^n - u^{n-1} + (v dt)^2 lap(u^n), then
  // damps the sponge cells of both levels. Afterwards w.cur is u^{n+1}.
  void Step(Wavefield& w) const;

  // Adds `amplitude` * (v dt)^2 / dx^2 at padded cell index `i` of w.cur (a
  // point source scaled like the Laplacian term).
  void Inject(Wavefield& w, size_t i, float amplitude) const { w.cur[i] += coef_[i] * amplitude; }

  float dt() const { return dt_; }
  const Grid& grid() const { return grid_; }

 private:
  Grid grid_;
  float dt_;
  std::vector<float> coef_;  // (v dt / dx)^2 per cell
  std::vector<float> damp_;  // sponge factor per cell (1 inside)
};

// Ricker wavelet of peak frequency f0 (Hz) delayed by t0 (s), at time t (s).
float Ricker(float f0, float t0, float t);

}  // namespace rtm
