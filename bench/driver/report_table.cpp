// The results document -> the stdout table (report.hpp).
#include <cstdio>
#include <initializer_list>
#include <optional>
#include <string>

#include "driver/report.hpp"

namespace cairn::bench {

namespace {

// What the stdout table's parts print with: a number at a path ("-" when
// absent) and a string at a path ("?").
struct TablePrinter {
  std::FILE* out;
  const Json& doc;
  void f(const Json* j, const char* path, const char* fmt, int width) const {
    std::optional<double> v = j ? j->Number(path) : std::nullopt;
    if (v)
      std::fprintf(out, fmt, width, *v);
    else
      std::fprintf(out, "%*s", width, "-");
  }
  std::string str(const char* path) const {
    const Json* j = doc.Find(path);
    return j != nullptr && j->type() == Json::Type::kString ? j->string() : std::string("?");
  }
  // Each field's text, then its number (printf format, no width).
  struct Field {
    const char* text;
    const char* path;
    const char* fmt;
  };
  void Fields(const Json* j, std::initializer_list<Field> fields) const {
    for (const Field& x : fields) {
      std::fputs(x.text, out);
      f(j, x.path, x.fmt, 0);
    }
  }
};

void PrintLimits(const TablePrinter& p, bool restart) {
  p.Fields(&p.doc, {{"limits (GB/s): memcpy ", "limits.memcpy_gbps", "%*.2f"},
                    {" (", "limits.memcpy_threads", "%*.0f"},
                    {" threads; 1 thread ", "limits.memcpy_single_thread_gbps", "%*.2f"},
                    {") | write+fsync ", "limits.write_gbps", "%*.2f"},
                    {" | page-cache write ", "limits.write_nofsync_gbps", "%*.2f"},
                    {" | O_DIRECT write ", "limits.direct_write_gbps", "%*.2f"}});
  std::fprintf(p.out, " | read (%s) ", p.str("limits.read_method").c_str());
  p.f(&p.doc, "limits.read_gbps", "%*.2f", 0);
  if (restart) p.Fields(&p.doc, {{" | cold read ", "limits.cold_read_gbps", "%*.2f"}});
  std::fprintf(p.out, "\n");
}

void PrintModes(const TablePrinter& p, bool restart) {
  std::FILE* out = p.out;
  if (restart) {
    std::fprintf(out, "%-10s %9s %11s %11s %9s %9s %10s %13s %10s\n", "mode", "open_s",
                 "ckpt_med_s", "ckpt_max_s", "wait_s", "latest_s", "restore_s", "total_block_s",
                 "cold_rst_s");
  } else {
    std::fprintf(out, "%-10s %9s %11s %11s %10s %11s %9s %13s\n", "mode", "open_s", "fwd_block_s",
                 "capture_GBs", "flush_GBs", "bwd_block_s", "hit_ratio", "total_block_s");
  }
  for (const char* mode : {"async", "sync", "sync_other"}) {
    const Json* m = p.doc.Find(mode);
    if (m == nullptr) continue;
    const Json* fs = m->Find("fsync");
    const bool is_sync = fs != nullptr && fs->type() == Json::Type::kBool;
    const std::string name = !is_sync ? std::string(mode) : fs->boolean() ? "sync+fsync" : "sync";
    std::fprintf(out, "%-10s ", name.c_str());
    p.f(m, "init.open_s", "%*.4f", 9);
    if (restart) {
      p.f(m, "restart.checkpoint_blocking_s", " %*.4f", 11);
      p.f(m, "restart.checkpoint_blocking_max_s", " %*.4f", 11);
      p.f(m, "restart.wait_s", " %*.4f", 9);
      p.f(m, "restart.latest_s", " %*.4f", 9);
      p.f(m, "restart.restore_s", " %*.4f", 10);
    } else {
      p.f(m, "forward.blocking_s", " %*.4f", 11);
      p.f(m, "forward.capture_gbps", " %*.2f", 11);
      p.f(m, "flush.gbps", " %*.2f", 10);
      p.f(m, "backward.blocking_s", " %*.4f", 11);
      p.f(m, "backward.cache_hit_ratio", " %*.3f", 9);
    }
    p.f(m, "total_blocking_s", " %*.4f", 13);
    if (restart) p.f(m, "restart.cold_restore_s", " %*.4f", 10);
    const Json* status = m->Find("status");
    std::fprintf(out, "%s\n", status != nullptr && status->string() == "ok" ? "" : "  FAILED");
  }
}

void PrintRatios(const TablePrinter& p, bool restart) {
  p.Fields(&p.doc,
           {{"ratios: sync/async total blocking ", "ratios.sync_to_async_total_blocking", "%*.2fx"},
            {" (other fsync variant ", "ratios.sync_other_to_async_total_blocking", "%*.2fx"},
            {") | capture/memcpy ", "ratios.capture_to_memcpy", "%*.2f"},
            {" (waits included ", "ratios.capture_with_waits_to_memcpy", "%*.2f"},
            {") | flush/O_DIRECT write ", "ratios.flush_to_direct_write", "%*.2f"},
            {" | flush/buffered write ", "ratios.flush_to_buffered_write", "%*.2f"}});
  std::fprintf(p.out, "\n");
  if (!restart) return;
  std::fprintf(p.out, "changes (%s, fraction ", p.str("params.changes").c_str());
  p.f(&p.doc, "params.change_fraction", "%*.3f", 0);
  std::fprintf(p.out, " %s): changed ", p.str("params.change_pattern").c_str());
  p.f(&p.doc, "changes.bytes_changed", "%*.0f", 0);
  p.Fields(&p.doc, {{" B, written ", "changes.bytes_written", "%*.0f"},
                    {" B (", "changes.written_to_changed", "%*.3fx"},
                    {"; after version 0: ", "changes.written_to_changed_after_first", "%*.3fx"},
                    {") | tip depth ", "changes.tip_depth", "%*.0f"},
                    {" | tracking overhead ", "tracking.overhead", "%*.4f"}});
  std::fprintf(p.out, "\n");
}

// The GPU tier, when one was used (device/managed memory or a device cache
// that got a GPU): Cairn's (async) medians.
void PrintDevice(const TablePrinter& p) {
  const Json* dev = p.doc.Find("async.device");
  const Json* gpu = dev ? dev->Find("gpu") : nullptr;
  const bool used = (gpu != nullptr && gpu->type() == Json::Type::kBool && gpu->boolean()) ||
                    p.str("params.memory") != "host";
  if (!used) return;
  const std::optional<double> cache = p.doc.Number("params.device_cache_bytes");
  std::fprintf(p.out, "device: %s memory, device cache %.0f MiB %s", p.str("params.memory").c_str(),
               cache ? *cache / (1 << 20) : 0.0, p.str("params.device_cache_init").c_str());
  if (dev != nullptr) {  // Cairn ran
    p.Fields(dev,
             {{" | capture ", "capture_gbps", "%*.2f"}, {" GB/s | drain ", "drain_gbps", "%*.2f"}});
    std::fprintf(p.out, " GB/s (%.1f MiB)", dev->Number("drain_bytes").value_or(0) / (1 << 20));
    p.Fields(dev, {{" | prefetch ", "prefetch_gbps", "%*.2f"},
                   {" GB/s | hits ", "hits", "%*.0f"},
                   {" | blocked ", "capture_blocked_s", "%*.4f"},
                   {" s | fully mapped ", "fully_mapped_s", "%*.3f s"}});
  }
  p.Fields(&p.doc, {{"\ndevice limits (GB/s): HtoD ", "limits.htod_gbps", "%*.2f"},
                    {" | DtoH ", "limits.dtoh_gbps", "%*.2f"},
                    {" | DtoD ", "limits.dtod_gbps", "%*.2f"}});
  std::fprintf(p.out, "\n");
}

}  // namespace

void PrintTable(std::FILE* out, const Json& doc) {
  const TablePrinter p{out, doc};
  const bool restart = p.str("workload") == "restart";
  std::fprintf(out, "cairn-bench %s\n", p.str("workload").c_str());
  PrintLimits(p, restart);
  PrintModes(p, restart);
  PrintRatios(p, restart);
  PrintDevice(p);
}

}  // namespace cairn::bench
