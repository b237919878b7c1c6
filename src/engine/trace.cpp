#include "engine/trace.hpp"

#include <unistd.h>

#include <sys/syscall.h>

#include <cstdio>

namespace cairn::core {

namespace {

// JSON string body: escapes quotes, backslashes and control characters.
void AppendEscaped(std::string* out, const std::string& s) {
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out->append(buf);
    } else {
      out->push_back(c);
    }
  }
}

}  // namespace

Tracer::Tracer(std::string path, os::FileSystem* fs, size_t max_events)
    : path_(std::move(path)), fs_(fs), max_events_(max_events) {}

int Tracer::Tid() { return static_cast<int>(::syscall(SYS_gettid)); }

double Tracer::Micros(Clock::time_point t) const {
  return std::chrono::duration<double, std::micro>(t - origin_).count();
}

bool Tracer::Admit() {
  if (written_) return false;
  if (events_.size() >= max_events_) {
    ++dropped_;
    return false;
  }
  return true;
}

void Tracer::NameThread(const std::string& name) {
  if (!enabled()) return;
  MutexLock lock(&mu_);
  if (!Admit()) return;
  events_.push_back({'M', "thread_name", "", Tid(), 0, 0, 0, 0, -1, name});
}

void Tracer::Span(const char* name, const char* category, Clock::time_point start,
                  Clock::time_point end, uint64_t bytes, const std::string& entry, int64_t number) {
  if (!enabled()) return;
  const int tid = Tid();
  MutexLock lock(&mu_);
  if (!Admit()) return;
  events_.push_back({'X', name, category, tid, Micros(start), Micros(end) - Micros(start), bytes, 0,
                     number, entry});
}

void Tracer::Instant(const char* name, const char* category, uint64_t bytes, const std::string& entry) {
  if (!enabled()) return;
  const int tid = Tid();
  const double now = Micros(Clock::now());
  MutexLock lock(&mu_);
  if (!Admit()) return;
  events_.push_back({'i', name, category, tid, now, 0, bytes, 0, -1, entry});
}

void Tracer::Counter(const char* name, uint64_t used_bytes, uint64_t dirty_bytes) {
  if (!enabled()) return;
  const double now = Micros(Clock::now());
  MutexLock lock(&mu_);
  if (!Admit()) return;
  events_.push_back({'C', name, "cache", 0, now, 0, used_bytes, dirty_bytes, -1, {}});
}

uint64_t Tracer::dropped() const {
  MutexLock lock(&mu_);
  return dropped_;
}

Status Tracer::Write() {
  std::string out;
  {
    MutexLock lock(&mu_);
    if (!enabled() || written_) return Status::Ok();
    written_ = true;
    const int pid = static_cast<int>(::getpid());
    out.reserve(events_.size() * 160 + 256);
    out += "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"tool\":\"cairn\",\"dropped_events\":";
    out += std::to_string(dropped_);
    out += "},\"traceEvents\":[\n";
    char buf[256];
    for (size_t i = 0; i < events_.size(); ++i) {
      const Event& e = events_[i];
      if (i) out += ",\n";
      switch (e.phase) {
        case 'M':
          std::snprintf(buf, sizeof buf, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"",
                        pid, e.tid);
          out += buf;
          AppendEscaped(&out, e.entry);
          out += "\"}}";
          break;
        case 'C':
          std::snprintf(buf, sizeof buf,
                        "{\"ph\":\"C\",\"name\":\"%s\",\"pid\":%d,\"tid\":0,\"ts\":%.3f,"
                        "\"args\":{\"used_bytes\":%llu,\"dirty_bytes\":%llu}}",
                        e.name, pid, e.ts_us, static_cast<unsigned long long>(e.a),
                        static_cast<unsigned long long>(e.b));
          out += buf;
          break;
        default:
          std::snprintf(buf, sizeof buf,
                        "{\"ph\":\"%c\",\"name\":\"%s\",\"cat\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,",
                        e.phase, e.name, e.category, pid, e.tid, e.ts_us);
          out += buf;
          if (e.phase == 'X') {
            std::snprintf(buf, sizeof buf, "\"dur\":%.3f,", e.dur_us);
            out += buf;
          } else {
            out += "\"s\":\"t\",";
          }
          std::snprintf(buf, sizeof buf, "\"args\":{\"bytes\":%llu", static_cast<unsigned long long>(e.a));
          out += buf;
          if (!e.entry.empty()) {
            out += ",\"entry\":\"";
            AppendEscaped(&out, e.entry);
            out += "\"";
          }
          if (e.number >= 0) out += ",\"number\":" + std::to_string(e.number);
          out += "}}";
      }
    }
    out += "\n]}\n";
    events_.clear();
    events_.shrink_to_fit();
  }
  const std::string tmp = path_ + ".tmp";
  auto file = fs_->Open(tmp, os::OpenOptions{.write = true, .direct = false, .mode = 0644});
  if (!file.ok()) return file.status().WithContext("trace");
  Status s = (*file)->WriteAt(out.data(), out.size(), 0);
  if (s.ok()) s = (*file)->Close();
  if (s.ok()) s = fs_->Rename(tmp, path_);
  if (!s.ok()) {
    (void)fs_->Remove(tmp);
    return s.WithContext("trace");
  }
  return Status::Ok();
}

}  // namespace cairn::core
