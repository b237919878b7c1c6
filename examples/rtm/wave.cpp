#include "wave.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace rtm {

void Wavefield::Zero() {
  std::fill(cur.begin(), cur.end(), 0.0f);
  std::fill(prev.begin(), prev.end(), 0.0f);
}

float Propagator::StableDt(const Model& model, float courant) {
  return courant * model.grid.dx / model.vmax();
}

Propagator::Propagator(const Model& model, float dt) : grid_(model.grid), dt_(dt) {
  const size_t n = grid_.cells();
  coef_.resize(n);
  const float r = dt / grid_.dx;
  for (size_t i = 0; i < n; ++i) coef_[i] = model.v[i] * model.v[i] * r * r;
  // Cerjan et al. (1985): multiply by exp(-(a (pad - d))^2) at depth d into
  // the pad; a chosen so the outermost cell keeps ~91% per step.
  damp_.assign(n, 1.0f);
  const int pad = grid_.pad, NX = grid_.NX(), NZ = grid_.NZ();
  if (pad > 0) {
    const double a = 0.3 / pad;
    for (int z = 0; z < NZ; ++z) {
      for (int x = 0; x < NX; ++x) {
        const int d = std::min({x, z, NX - 1 - x, NZ - 1 - z});
        if (d < pad) {
          const double e = a * (pad - d);
          damp_[static_cast<size_t>(z) * NX + x] = static_cast<float>(std::exp(-e * e));
        }
      }
    }
  }
}

void Propagator::Step(Wavefield& w) const {
  const int NX = grid_.NX(), NZ = grid_.NZ();
  constexpr float c0 = -5.0f, c1 = 4.0f / 3.0f, c2 = -1.0f / 12.0f;  // 2-D: 2 * (-5/2)
  const float* __restrict u = w.cur.data();
  float* __restrict up = w.prev.data();  // u^{n-1} in, u^{n+1} out (read before written)
  const float* __restrict cf = coef_.data();
  for (int z = 2; z < NZ - 2; ++z) {
    const size_t row = static_cast<size_t>(z) * NX;
    for (int x = 2; x < NX - 2; ++x) {
      const size_t i = row + x;
      const float lap = c0 * u[i] + c1 * (u[i - 1] + u[i + 1] + u[i - NX] + u[i + NX]) +
                        c2 * (u[i - 2] + u[i + 2] + u[i - 2 * NX] + u[i + 2 * NX]);
      up[i] = 2.0f * u[i] - up[i] + cf[i] * lap;
    }
  }
  // Sponge: damp both time levels in the pad band only.
  const int pad = grid_.pad;
  float* next = w.prev.data();
  float* now = w.cur.data();
  const float* g = damp_.data();
  for (int z = 0; z < NZ; ++z) {
    const size_t row = static_cast<size_t>(z) * NX;
    const bool band = z < pad || z >= NZ - pad;
    auto damp = [&](int x0, int x1) {
      for (int x = x0; x < x1; ++x) {
        next[row + x] *= g[row + x];
        now[row + x] *= g[row + x];
      }
    };
    if (band) {
      damp(0, NX);
    } else {
      damp(0, pad);
      damp(NX - pad, NX);
    }
  }
  std::swap(w.cur, w.prev);
}

float Ricker(float f0, float t0, float t) {
  const double a = std::numbers::pi * f0 * (t - t0);
  const double a2 = a * a;
  return static_cast<float>((1.0 - 2.0 * a2) * std::exp(-a2));
}

}  // namespace rtm
