// A minimal PNG writer (8-bit grayscale or RGB, no interlace), deflate by zlib.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rtm {

// Writes width*height pixels of `channels` (1 = gray, 3 = RGB) bytes each,
// row-major from the top. Returns "" on success, else an error message.
std::string WritePng(const std::string& path, int width, int height, int channels,
                     const std::vector<uint8_t>& pixels);

// Gray image of a velocity field (nx * nz, row-major): vmin black, vmax white.
std::vector<uint8_t> VelocityToGray(const std::vector<float>& v, float vmin, float vmax);

// Seismic red-white-blue colormap of a signed image, clipped at the given
// percentile of |value| (e.g. 0.99); zero is white.
std::vector<uint8_t> ImageToRgb(const std::vector<float>& image, double clip_percentile);

}  // namespace rtm
