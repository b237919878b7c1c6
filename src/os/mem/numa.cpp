#include "os/mem/numa.hpp"

#include <dirent.h>
#include <linux/mempolicy.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "os/fs/fs.hpp"

#ifdef CAIRN_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace cairn::os {

int Topology::cpus() const {
  int n = 0;
  for (const auto& c : node_cpus) n += static_cast<int>(c.size());
  return n;
}

int Topology::NodeOfCpu(int cpu) const {
  for (int k = 0; k < nodes(); ++k) {
    if (std::binary_search(node_cpus[k].begin(), node_cpus[k].end(), cpu)) return k;
  }
  return -1;
}

pid_t CurrentTid() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

Result<std::vector<int>> ParseCpuList(const std::string& text) {
  std::vector<int> cpus;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    part.erase(std::remove_if(part.begin(), part.end(), [](char c) { return c == '\n' || c == ' '; }),
               part.end());
    if (part.empty()) continue;
    int lo = 0, hi = 0;
    char dash = 0;
    std::stringstream p(part);
    if (!(p >> lo) || lo < 0) return Status::InvalidArgument("cpu list '" + text + "': bad part '" + part + "'");
    hi = lo;
    if (p >> dash) {
      if (dash != '-' || !(p >> hi) || hi < lo) {
        return Status::InvalidArgument("cpu list '" + text + "': bad range '" + part + "'");
      }
    }
    if (hi > 65535) return Status::InvalidArgument("cpu list '" + text + "': cpu " + std::to_string(hi) + " too large");
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) {
      out += '-';
      out += std::to_string(cpus[j]);
    }
    i = j + 1;
  }
  return out;
}

namespace {

constexpr int kMaxNodes = 1024;  // nodemask bits passed to mbind

// The CPUs this process may run on: the one-node fallback topology.
std::vector<int> OnlineCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
  }
  if (cpus.empty()) cpus.push_back(0);
  return cpus;
}

// node<k>/cpulist for every k under root; nodes without CPUs (memory-only)
// keep an empty list, so node numbers stay the kernel's.
Topology ReadTopology(const std::string& root) {
  Topology t;
  std::vector<int> ids;
  if (DIR* d = ::opendir(root.c_str())) {
    while (dirent* ent = ::readdir(d)) {
      int k = 0;
      char extra = 0;
      if (std::sscanf(ent->d_name, "node%d%c", &k, &extra) == 1 && k >= 0 && k < kMaxNodes) ids.push_back(k);
    }
    ::closedir(d);
  }
  std::sort(ids.begin(), ids.end());
  if (ids.empty() || ids.front() != 0) {
    t.node_cpus.push_back(OnlineCpus());
    return t;
  }
  t.node_cpus.resize(ids.back() + 1);
  for (int k : ids) {
    std::ifstream in(root + "/node" + std::to_string(k) + "/cpulist");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto cpus = ParseCpuList(text);
    if (cpus.ok()) t.node_cpus[k] = *cpus;
  }
  return t;
}

#ifdef CAIRN_HAVE_HWLOC
// Every NUMA node hwloc reports, by OS index, with the CPUs (OS indexes) of
// its cpuset; a topology without NUMA nodes is one node of every PU.
Topology FromHwloc(hwloc_topology_t topo) {
  Topology t;
  auto cpus_of = [](hwloc_const_cpuset_t set) {
    std::vector<int> cpus;
    for (int c = hwloc_bitmap_first(set); c >= 0; c = hwloc_bitmap_next(set, c)) cpus.push_back(c);
    return cpus;
  };
  for (hwloc_obj_t n = nullptr; (n = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, n)) != nullptr;) {
    if (n->os_index >= static_cast<unsigned>(kMaxNodes)) continue;
    if (t.node_cpus.size() <= n->os_index) t.node_cpus.resize(n->os_index + 1);
    t.node_cpus[n->os_index] = cpus_of(n->cpuset);
  }
  if (t.node_cpus.empty()) t.node_cpus.push_back(cpus_of(hwloc_get_root_obj(topo)->cpuset));
  return t;
}
#endif

// The machine's topology: hwloc's when built with it (which honours
// HWLOC_XMLFILE), else sysfs.
Topology SystemTopology() {
  if (auto t = ReadHwlocTopology(""); t.ok()) return std::move(t).value();
  return ReadTopology("/sys/devices/system/node");
}

class RealNumaImpl final : public Numa {
 public:
  explicit RealNumaImpl(const std::string& root) : topology_(ReadTopology(root)) {}
  explicit RealNumaImpl(Topology t) : topology_(std::move(t)) {}
  const Topology& topology() const override { return topology_; }

  Status QueryNodes(std::span<void* const> pages, std::span<int> nodes) override {
    if (pages.size() != nodes.size()) return Status::Internal("QueryNodes: span sizes differ");
    if (pages.empty()) return Status::Ok();
    // move_pages with nodes = NULL only reports where each page is.
    long r = ::syscall(SYS_move_pages, 0, pages.size(), pages.data(), nullptr, nodes.data(), 0);
    if (r < 0) {
      if (errno == ENOSYS || errno == EPERM) {  // no NUMA in this kernel / container: all on node 0
        std::fill(nodes.begin(), nodes.end(), 0);
        return Status::Ok();
      }
      return ErrnoStatus(errno, "move_pages (query)", "");
    }
    for (int& n : nodes) {
      if (n < 0) n = -1;  // -ENOENT (not resident), -EFAULT, ...
    }
    return Status::Ok();
  }

  Status Bind(void* addr, size_t bytes, Binding b) override {
    unsigned long mask[kMaxNodes / (8 * sizeof(unsigned long))] = {};
    int mode = MPOL_PREFERRED;
    if (b.node >= 0) {
      if (b.node >= topology_.nodes()) return Status::InvalidArgument("bind: no node " + std::to_string(b.node));
      mask[b.node / (8 * sizeof(unsigned long))] |= 1UL << (b.node % (8 * sizeof(unsigned long)));
    } else {
      mode = MPOL_INTERLEAVE;
      for (int k = 0; k < topology_.nodes(); ++k) {
        mask[k / (8 * sizeof(unsigned long))] |= 1UL << (k % (8 * sizeof(unsigned long)));
      }
    }
    long r = ::syscall(SYS_mbind, addr, bytes, mode, mask, kMaxNodes + 1, MPOL_MF_MOVE);
    if (r < 0 && errno != ENOSYS) return ErrnoStatus(errno, "mbind", "");
    return Status::Ok();
  }

  Status Unbind(void* addr, size_t bytes) override {
    long r = ::syscall(SYS_mbind, addr, bytes, MPOL_DEFAULT, nullptr, 0, 0);
    if (r < 0 && errno != ENOSYS) return ErrnoStatus(errno, "mbind (default)", "");
    return Status::Ok();
  }

  Result<std::vector<int>> GetAffinity(pid_t tid) override {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(tid, sizeof(set), &set) != 0) {
      return ErrnoStatus(errno, "sched_getaffinity of thread " + std::to_string(tid), "");
    }
    std::vector<int> cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
    return cpus;
  }

  Status SetAffinity(pid_t tid, const std::vector<int>& cpus) override {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : cpus) {
      if (c < 0 || c >= CPU_SETSIZE) return Status::InvalidArgument("affinity: cpu " + std::to_string(c));
      CPU_SET(c, &set);
    }
    if (::sched_setaffinity(tid, sizeof(set), &set) != 0) {
      return ErrnoStatus(errno, "sched_setaffinity to cpus " + FormatCpuList(cpus), "");
    }
    return Status::Ok();
  }

 private:
  Topology topology_;
};

}  // namespace

bool HaveHwloc() {
#ifdef CAIRN_HAVE_HWLOC
  return true;
#else
  return false;
#endif
}

Result<Topology> ReadHwlocTopology(const std::string& xml_path) {
#ifdef CAIRN_HAVE_HWLOC
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) return ErrnoStatus(errno, "hwloc_topology_init", "");
  struct Destroy {
    hwloc_topology_t t;
    ~Destroy() { hwloc_topology_destroy(t); }
  } destroy{topo};
  // Nodes and PUs are all we read: caches and I/O devices are not
  // discovered (less work at the first client's open).
  (void)hwloc_topology_set_cache_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_NONE);
  (void)hwloc_topology_set_icache_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_NONE);
  (void)hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_NONE);
  if (!xml_path.empty() && hwloc_topology_set_xml(topo, xml_path.c_str()) != 0) {
    return Status::InvalidArgument("hwloc: cannot use topology XML '" + xml_path + "': " + std::strerror(errno));
  }
  if (hwloc_topology_load(topo) != 0) {
    return Status::Io(std::string("hwloc: loading the topology") +
                      (xml_path.empty() ? "" : " from '" + xml_path + "'") + " failed: " + std::strerror(errno));
  }
  return FromHwloc(topo);
#else
  (void)xml_path;
  return Status::Unsupported("built without hwloc (pkg-config found no hwloc >= 2.0 at build time)");
#endif
}

Numa& RealNuma() {
  static RealNumaImpl numa(SystemTopology());
  return numa;
}

std::unique_ptr<Numa> MakeRealNuma(const std::string& sysfs_root) {
  return std::make_unique<RealNumaImpl>(sysfs_root);
}

std::unique_ptr<Numa> MakeRealNuma(Topology topology) {
  return std::make_unique<RealNumaImpl>(std::move(topology));
}

// --- FakeNuma ------------------------------------------------------------------

namespace {
constexpr uintptr_t kFakePage = 4096;
}

int FakeNuma::NodeOf(uintptr_t page) const {
  auto it = page_node_.find(page);
  return it == page_node_.end() ? default_node_ : it->second;
}

Status FakeNuma::QueryNodes(std::span<void* const> pages, std::span<int> nodes) {
  MutexLock l(&mu_);
  query_pages_ += static_cast<int>(pages.size());
  for (size_t i = 0; i < pages.size(); ++i) nodes[i] = NodeOf(reinterpret_cast<uintptr_t>(pages[i]) & ~(kFakePage - 1));
  return Status::Ok();
}

void FakeNuma::Place(void* addr, size_t bytes, int node) {
  MutexLock l(&mu_);
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  for (uintptr_t p = a & ~(kFakePage - 1); p < a + bytes; p += kFakePage) page_node_[p] = node;
}

Status FakeNuma::Bind(void* addr, size_t bytes, Binding b) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  if (a % kFakePage != 0) return Status::InvalidArgument("bind: unaligned address");
  if (b.node >= topology_.nodes()) return Status::InvalidArgument("bind: no node " + std::to_string(b.node));
  MutexLock l(&mu_);
  binds_.push_back({a, bytes, b.node});
  int i = 0;
  for (uintptr_t p = a; p < a + bytes; p += kFakePage, ++i) {
    page_node_[p] = b.node >= 0 ? b.node : i % topology_.nodes();
  }
  return Status::Ok();
}

Status FakeNuma::Unbind(void*, size_t) {
  MutexLock l(&mu_);
  ++unbinds_;
  return Status::Ok();
}

Result<std::vector<int>> FakeNuma::GetAffinity(pid_t tid) {
  MutexLock l(&mu_);
  auto it = affinity_.find(tid == 0 ? CurrentTid() : tid);
  if (it != affinity_.end()) return it->second;
  std::vector<int> all;
  for (const auto& n : topology_.node_cpus) all.insert(all.end(), n.begin(), n.end());
  std::sort(all.begin(), all.end());
  return all;
}

Status FakeNuma::SetAffinity(pid_t tid, const std::vector<int>& cpus) {
  MutexLock l(&mu_);
  affinity_[tid == 0 ? CurrentTid() : tid] = cpus;
  affinity_sets_.emplace_back(tid == 0 ? CurrentTid() : tid, cpus);
  return Status::Ok();
}

std::vector<FakeNuma::BindCall> FakeNuma::binds() const {
  MutexLock l(&mu_);
  return binds_;
}
int FakeNuma::unbinds() const {
  MutexLock l(&mu_);
  return unbinds_;
}
std::vector<std::pair<pid_t, std::vector<int>>> FakeNuma::affinity_sets() const {
  MutexLock l(&mu_);
  return affinity_sets_;
}
int FakeNuma::query_pages() const {
  MutexLock l(&mu_);
  return query_pages_;
}

}  // namespace cairn::os
