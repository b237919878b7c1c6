// Velocity model of the RTM demo: a layered earth with flat and curved
// interfaces, padded with absorbing-boundary cells, and its smoothed copy used
// for migration.
#pragma once

#include <cstddef>
#include <vector>

namespace rtm {

// A 2-D grid: nx * nz interior cells of size dx metres, surrounded by `pad`
// cells on every side (the absorbing layer). Arrays are row-major over the
// padded grid: index = (z + pad) * NX() + (x + pad), z growing downwards.
struct Grid {
  int nx = 0, nz = 0, pad = 0;
  float dx = 10.0f;
  int NX() const { return nx + 2 * pad; }
  int NZ() const { return nz + 2 * pad; }
  size_t cells() const { return static_cast<size_t>(NX()) * static_cast<size_t>(NZ()); }
  size_t At(int x, int z) const {  // interior coordinates (may reach into the pad)
    return static_cast<size_t>(z + pad) * static_cast<size_t>(NX()) + static_cast<size_t>(x + pad);
  }
};

// One interface between two layers: depth (in interior cells, fractional) as a
// function of x. Flat interfaces have amp == 0; a curved one is an anticline
// (Gaussian bump of height amp cells, rising towards the surface).
struct Interface {
  double depth = 0;        // depth far from the bump, cells
  double amp = 0;          // bump height, cells (> 0 rises)
  double centre = 0;       // bump centre, cells
  double width = 1;        // bump half-width, cells
  double DepthAt(double x) const;
  bool flat() const { return amp == 0; }
};

struct Model {
  Grid grid;
  std::vector<float> layer_velocity;   // velocity of each layer, top to bottom (m/s)
  std::vector<Interface> interfaces;   // layer_velocity.size() - 1 of them
  std::vector<float> v;                // velocity per padded cell (m/s)
  float vmin() const;
  float vmax() const;
};

// The demo's earth: 1500, 2000, 2500, 3000 m/s separated by a flat reflector
// at 30% of the depth, an anticline (base 55%, crest 45%) and a flat reflector
// at 78%. Padded cells copy the nearest interior cell.
Model LayeredModel(const Grid& grid);

// Same grid, constant velocity (the model used to subtract the direct wave).
Model ConstantModel(const Grid& grid, float velocity);

// The migration model: the slowness of `m` box-smoothed (`passes` passes of
// radius `radius` cells in x and z; averaging slowness preserves vertical
// travel times), then scaled by `scale` (1 = correct; other values misplace
// the reflectors, used to show that --check can fail).
Model SmoothedModel(const Model& m, int radius, int passes, float scale);

}  // namespace rtm
