#include "model.hpp"

#include <algorithm>
#include <cmath>

namespace rtm {

double Interface::DepthAt(double x) const {
  if (amp == 0) return depth;
  const double t = (x - centre) / width;
  return depth - amp * std::exp(-t * t);
}

float Model::vmin() const { return *std::min_element(v.begin(), v.end()); }
float Model::vmax() const { return *std::max_element(v.begin(), v.end()); }

namespace {

// Fills the padded cells by copying the nearest interior cell.
void ExtendIntoPad(const Grid& g, std::vector<float>& a) {
  for (int z = -g.pad; z < g.nz + g.pad; ++z) {
    const int zc = std::clamp(z, 0, g.nz - 1);
    for (int x = -g.pad; x < g.nx + g.pad; ++x) {
      const int xc = std::clamp(x, 0, g.nx - 1);
      if (x != xc || z != zc) a[g.At(x, z)] = a[g.At(xc, zc)];
    }
  }
}

// One box-filter pass of radius r along x then z (clamped at the edges).
void BoxSmooth(const Grid& g, std::vector<float>& a, int r) {
  const int NX = g.NX(), NZ = g.NZ();
  std::vector<float> tmp(a.size());
  for (int z = 0; z < NZ; ++z) {
    for (int x = 0; x < NX; ++x) {
      double s = 0;
      for (int k = -r; k <= r; ++k) s += a[static_cast<size_t>(z) * NX + std::clamp(x + k, 0, NX - 1)];
      tmp[static_cast<size_t>(z) * NX + x] = static_cast<float>(s / (2 * r + 1));
    }
  }
  for (int z = 0; z < NZ; ++z) {
    for (int x = 0; x < NX; ++x) {
      double s = 0;
      for (int k = -r; k <= r; ++k) s += tmp[static_cast<size_t>(std::clamp(z + k, 0, NZ - 1)) * NX + x];
      a[static_cast<size_t>(z) * NX + x] = static_cast<float>(s / (2 * r + 1));
    }
  }
}

}  // namespace

Model LayeredModel(const Grid& grid) {
  Model m;
  m.grid = grid;
  m.layer_velocity = {1500.0f, 2000.0f, 2500.0f, 3000.0f};
  const double nz = grid.nz, nx = grid.nx;
  m.interfaces = {
      Interface{0.30 * nz, 0, 0, 1},                        // flat
      Interface{0.55 * nz, 0.10 * nz, 0.5 * nx, 0.18 * nx},  // anticline, crest at 45%
      Interface{0.78 * nz, 0, 0, 1},                        // flat
  };
  m.v.assign(grid.cells(), 0.0f);
  for (int z = 0; z < grid.nz; ++z) {
    for (int x = 0; x < grid.nx; ++x) {
      size_t layer = 0;
      // Cell centre below the interface -> next layer.
      while (layer < m.interfaces.size() && z + 0.5 > m.interfaces[layer].DepthAt(x + 0.5)) ++layer;
      m.v[grid.At(x, z)] = m.layer_velocity[layer];
    }
  }
  ExtendIntoPad(grid, m.v);
  return m;
}

Model ConstantModel(const Grid& grid, float velocity) {
  Model m;
  m.grid = grid;
  m.layer_velocity = {velocity};
  m.v.assign(grid.cells(), velocity);
  return m;
}

Model SmoothedModel(const Model& in, int radius, int passes, float scale) {
  Model m = in;
  for (float& v : m.v) v = 1.0f / v;
  for (int p = 0; p < passes; ++p) BoxSmooth(m.grid, m.v, radius);
  for (float& s : m.v) s = scale / s;
  return m;
}

}  // namespace rtm
