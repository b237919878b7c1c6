#include "png.hpp"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

namespace rtm {

namespace {

void Put32(std::vector<uint8_t>& out, uint32_t v) {
  out.push_back(static_cast<uint8_t>(v >> 24));
  out.push_back(static_cast<uint8_t>(v >> 16));
  out.push_back(static_cast<uint8_t>(v >> 8));
  out.push_back(static_cast<uint8_t>(v));
}

void Chunk(std::vector<uint8_t>& out, const char type[4], const std::vector<uint8_t>& body) {
  Put32(out, static_cast<uint32_t>(body.size()));
  const size_t start = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), body.begin(), body.end());
  const uLong crc = crc32(0L, out.data() + start, static_cast<uInt>(out.size() - start));
  Put32(out, static_cast<uint32_t>(crc));
}

}  // namespace

std::string WritePng(const std::string& path, int width, int height, int channels,
                     const std::vector<uint8_t>& pixels) {
  if (width <= 0 || height <= 0 || (channels != 1 && channels != 3) ||
      pixels.size() != static_cast<size_t>(width) * height * channels) {
    return "bad image dimensions";
  }
  // Raw scanlines, each prefixed by filter type 0 (none).
  const size_t stride = static_cast<size_t>(width) * channels;
  std::vector<uint8_t> raw;
  raw.reserve((stride + 1) * height);
  for (int y = 0; y < height; ++y) {
    raw.push_back(0);
    raw.insert(raw.end(), pixels.begin() + y * stride, pixels.begin() + (y + 1) * stride);
  }
  uLongf zlen = compressBound(static_cast<uLong>(raw.size()));
  std::vector<uint8_t> z(zlen);
  if (compress2(z.data(), &zlen, raw.data(), static_cast<uLong>(raw.size()), 6) != Z_OK) {
    return "zlib compress2 failed";
  }
  z.resize(zlen);

  std::vector<uint8_t> out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  std::vector<uint8_t> ihdr;
  Put32(ihdr, static_cast<uint32_t>(width));
  Put32(ihdr, static_cast<uint32_t>(height));
  ihdr.push_back(8);                                 // bit depth
  ihdr.push_back(channels == 1 ? 0 : 2);             // color type: gray / RGB
  ihdr.insert(ihdr.end(), {0, 0, 0});                // deflate, adaptive filter, no interlace
  Chunk(out, "IHDR", ihdr);
  Chunk(out, "IDAT", z);
  Chunk(out, "IEND", {});

  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) return "cannot create " + path;
  if (std::fwrite(out.data(), 1, out.size(), f.get()) != out.size()) return "cannot write " + path;
  if (std::fclose(f.release()) != 0) return "cannot write " + path;
  return "";
}

std::vector<uint8_t> VelocityToGray(const std::vector<float>& v, float vmin, float vmax) {
  std::vector<uint8_t> px(v.size());
  const float range = vmax > vmin ? vmax - vmin : 1.0f;
  for (size_t i = 0; i < v.size(); ++i) {
    const float t = std::clamp((v[i] - vmin) / range, 0.0f, 1.0f);
    px[i] = static_cast<uint8_t>(std::lround(40.0f + 215.0f * t));
  }
  return px;
}

std::vector<uint8_t> ImageToRgb(const std::vector<float>& image, double clip_percentile) {
  std::vector<float> mag(image.size());
  for (size_t i = 0; i < image.size(); ++i) mag[i] = std::fabs(image[i]);
  float clip = 1.0f;
  if (!mag.empty()) {
    const size_t k = std::min(mag.size() - 1, static_cast<size_t>(clip_percentile * mag.size()));
    std::nth_element(mag.begin(), mag.begin() + k, mag.end());
    clip = mag[k] > 0 ? mag[k] : 1.0f;
  }
  std::vector<uint8_t> px(image.size() * 3);
  for (size_t i = 0; i < image.size(); ++i) {
    const float t = std::clamp(image[i] / clip, -1.0f, 1.0f);  // -1 blue, 0 white, +1 red
    const auto fade = static_cast<uint8_t>(std::lround(255.0f * (1.0f - std::fabs(t))));
    px[3 * i + 0] = t < 0 ? fade : 255;
    px[3 * i + 1] = fade;
    px[3 * i + 2] = t > 0 ? fade : 255;
  }
  return px;
}

}  // namespace rtm
