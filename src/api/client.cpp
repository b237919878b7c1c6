// cairn::Client and cairn::History: argument checking and the protected-region
// registry in front of core::Pipeline.
#include <map>
#include <shared_mutex>

#include "cairn/cairn.hpp"
#include "core/pipeline.hpp"
#include "util/mutex.hpp"

namespace cairn {

namespace {

struct Region {
  void* ptr = nullptr;
  size_t bytes = 0;
  MemoryKind memory = MemoryKind::kHost;
};

}  // namespace

// Shared by a Client and its Histories, so that a History outliving its
// Client fails cleanly (kState) instead of touching freed memory.
struct ClientCore {
  // Calls hold it shared; Close() takes it exclusively, so it waits for
  // in-flight calls and no call starts on a closed pipeline.
  std::shared_mutex lifecycle;
  std::unique_ptr<core::Pipeline> pipeline;  // null once closed
  Mutex regions_mu;
  std::map<int, Region> regions CAIRN_GUARDED_BY(regions_mu);

  // Where a restore of the protected regions copies to.
  std::vector<core::RestoreTarget> RestoreTargets() CAIRN_EXCLUDES(regions_mu) {
    MutexLock regions_lock(&regions_mu);
    std::vector<core::RestoreTarget> targets;
    for (const auto& [id, r] : regions) {
      targets.push_back({.id = id, .memory = r.memory, .data = r.ptr, .bytes = r.bytes});
    }
    return targets;
  }
};

struct Client::Impl {
  std::shared_ptr<ClientCore> core = std::make_shared<ClientCore>();
  Config config;
};

struct History::Impl {
  std::shared_ptr<ClientCore> core;
  std::string name;
  bool closed = false;  // guarded by core->lifecycle (exclusive to change)
};

namespace {

Status Closed() { return Status::State("the client is closed"); }

}  // namespace

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() { (void)Close(); }

Result<std::unique_ptr<Client>> Client::Open(const Config& config) {
  CAIRN_ASSIGN_OR_RETURN(auto pipeline, core::Pipeline::Start(config));
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->core->pipeline = std::move(pipeline);
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Result<std::unique_ptr<Client>> Client::Open(const char* config_path) {
  CAIRN_ASSIGN_OR_RETURN(Config config, LoadConfig(config_path));
  return Open(config);
}

Status Client::Close() {
  std::unique_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Status::Ok();
  Status s = impl_->core->pipeline->Shutdown();
  impl_->core->pipeline.reset();
  return s;
}

Status Client::Protect(int id, void* ptr, size_t bytes) {
  if (ptr == nullptr && bytes > 0) {
    return Status::InvalidArgument("protect region " + std::to_string(id) + ": null pointer with " +
                                   std::to_string(bytes) + " bytes");
  }
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  // One call for host, device and managed pointers: the driver says which.
  auto kind = impl_->core->pipeline->ClassifyRegion(ptr, bytes);
  if (!kind.ok()) return kind.status().WithContext("protect region " + std::to_string(id));
  MutexLock regions_lock(&impl_->core->regions_mu);
  impl_->core->regions[id] = Region{ptr, bytes, *kind};
  return Status::Ok();
}

Status Client::Unprotect(int id) {
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  MutexLock regions_lock(&impl_->core->regions_mu);
  if (impl_->core->regions.erase(id) == 0) {
    return Status::NotFound("region " + std::to_string(id) + " is not protected");
  }
  return Status::Ok();
}

Status Client::Checkpoint(std::string_view name, int64_t version) {
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  std::vector<core::CaptureSource> sources;
  {
    MutexLock regions_lock(&impl_->core->regions_mu);
    for (const auto& [id, r] : impl_->core->regions) {
      sources.push_back({.spec = {.id = id, .memory = r.memory, .bytes = r.bytes}, .data = r.ptr});
    }
  }
  return impl_->core->pipeline->Capture(format::EntryKind::kCheckpoint, std::string(name), version,
                                        sources);
}

Status Client::Wait(std::string_view name, int64_t version, Level level) {
  if (level != Level::kCache && level != Level::kLocal && level != Level::kPersistent) {
    return Status::InvalidArgument("unknown level " + std::to_string(static_cast<int>(level)));
  }
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  return impl_->core->pipeline->Wait(format::EntryKind::kCheckpoint, std::string(name), version, level);
}

Result<int64_t> Client::Latest(std::string_view name) {
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  return impl_->core->pipeline->Latest(std::string(name));
}

Status Client::Restore(std::string_view name, int64_t version) {
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  return impl_->core->pipeline->Restore(std::string(name), version, impl_->core->RestoreTargets());
}

Result<int64_t> Client::RestoreLatest(std::string_view name) {
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  return impl_->core->pipeline->RestoreLatest(std::string(name), impl_->core->RestoreTargets());
}

Result<std::unique_ptr<History>> Client::OpenHistory(std::string_view name) {
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  CAIRN_RETURN_IF_ERROR(impl_->core->pipeline->OpenHistory(std::string(name)));
  auto impl = std::make_unique<History::Impl>();
  impl->core = impl_->core;
  impl->name = std::string(name);
  return std::unique_ptr<History>(new History(std::move(impl)));
}

Stats Client::GetStats() const {
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Stats{};
  return impl_->core->pipeline->GetStats();
}

const Config& Client::config() const { return impl_->config; }

// ---------------------------------------------------------------------------

History::History(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
History::~History() { (void)Close(); }

Status History::Push(int64_t step, const void* data, size_t bytes) {
  if (data == nullptr && bytes > 0) return Status::InvalidArgument("history push: null data");
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  if (impl_->closed) return Status::State("history '" + impl_->name + "' is closed");
  auto kind = impl_->core->pipeline->ClassifyRegion(data, bytes);
  if (!kind.ok()) return kind.status().WithContext("history push");
  core::CaptureSource source{.spec = {.id = 0, .memory = *kind, .bytes = bytes}, .data = data};
  return impl_->core->pipeline->Capture(format::EntryKind::kHistoryStep, impl_->name, step, {source});
}

Result<size_t> History::Pop(int64_t step, void* dst, size_t capacity) {
  if (dst == nullptr && capacity > 0) return Status::InvalidArgument("history pop: null buffer");
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  if (impl_->closed) return Status::State("history '" + impl_->name + "' is closed");
  auto kind = impl_->core->pipeline->ClassifyRegion(dst, capacity);
  if (!kind.ok()) return kind.status().WithContext("history pop");
  return impl_->core->pipeline->Pop(impl_->name, step, dst, capacity, *kind);
}

Result<size_t> History::StepSize(int64_t step) const {
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  if (impl_->closed) return Status::State("history '" + impl_->name + "' is closed");
  return impl_->core->pipeline->StepSize(impl_->name, step);
}

Status History::Close() {
  std::unique_lock lock(impl_->core->lifecycle);
  if (impl_->closed) return Status::Ok();
  impl_->closed = true;
  if (!impl_->core->pipeline) return Status::Ok();  // the client closed it already
  return impl_->core->pipeline->CloseHistory(impl_->name);
}

}  // namespace cairn
