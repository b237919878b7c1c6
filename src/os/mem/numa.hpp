// The NUMA and CPU-affinity seam (docs/design.md, "Placement"): the few
// calls that placement recording and restoring need, behind one interface so
// that tests can simulate several nodes on a one-node machine and check what
// would be moved where (FakeNuma below).
//
// The real implementation (numa.cpp) uses the kernel's calls directly
// (get/set affinity, move_pages in query mode, mbind with MPOL_MF_MOVE) and
// reads the topology from hwloc when built with it (optional: CMake finds
// it with pkg-config), else from sysfs (<root>/node<k>/cpulist); a kernel or
// container without NUMA support (no sysfs node directory, ENOSYS) is one
// node holding every CPU.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cairn/status.hpp"
#include "util/mutex.hpp"

namespace cairn::os {

struct Topology {
  // node_cpus[k]: the CPUs of node k, ascending. At least one node.
  std::vector<std::vector<int>> node_cpus;
  int nodes() const { return static_cast<int>(node_cpus.size()); }
  int cpus() const;  // CPUs over all nodes
  int NodeOfCpu(int cpu) const;  // -1 when no node lists it
};

// What a range of memory is bound to while a restore writes it.
struct Binding {
  int node = -1;  // >= 0: prefer this node; -1: interleave over all nodes
};

class Numa {
 public:
  virtual ~Numa() = default;
  virtual const Topology& topology() const = 0;
  // The node of each page (page-aligned addresses); -1 for a page that is
  // not resident (never touched) or whose node the kernel does not say.
  virtual Status QueryNodes(std::span<void* const> pages, std::span<int> nodes) = 0;
  // Sets the memory policy of [addr, addr + bytes) (page-aligned) so that
  // pages touched from now on are allocated on `b`, and moves the range's
  // resident pages that are elsewhere (mbind, MPOL_MF_MOVE): one call per
  // run is the batching.
  virtual Status Bind(void* addr, size_t bytes, Binding b) = 0;
  // Back to the default policy (first touch); moves nothing.
  virtual Status Unbind(void* addr, size_t bytes) = 0;
  // CPU affinity of a thread (tid 0 = the calling thread), ascending.
  virtual Result<std::vector<int>> GetAffinity(pid_t tid) = 0;
  virtual Status SetAffinity(pid_t tid, const std::vector<int>& cpus) = 0;
};

// The process's real NUMA layer. Its topology is read once, when first
// called: from hwloc when built with it (so HWLOC_XMLFILE can stand in
// another machine's layout), else from /sys/devices/system/node.
Numa& RealNuma();
// A real layer over another sysfs tree (tests give one made in a temp dir).
std::unique_ptr<Numa> MakeRealNuma(const std::string& sysfs_root);
// A real layer (the kernel's calls) that believes in `topology`.
std::unique_ptr<Numa> MakeRealNuma(Topology topology);
// Whether libcairn was built with hwloc (CMake found it with pkg-config).
bool HaveHwloc();
// The topology as hwloc sees it: from the XML file `xml_path` (an hwloc
// export, `lstopo file.xml`), or with "" the machine's (or HWLOC_XMLFILE's).
// kUnsupported when built without hwloc; kInvalidArgument / kIo name the
// file when it cannot be read.
Result<Topology> ReadHwlocTopology(const std::string& xml_path);
// The calling thread's kernel thread id.
pid_t CurrentTid();
// Parses a sysfs CPU list ("0-3,8,10-11"); kInvalidArgument names the bad part.
Result<std::vector<int>> ParseCpuList(const std::string& text);
// Formats a CPU list back ("0-3,8").
std::string FormatCpuList(const std::vector<int>& cpus);

// A simulated machine for tests: `topology` as given; every page of the
// process is "resident" on the node the fake last bound it to (or on
// `default_node` when never bound); records every call.
class FakeNuma final : public Numa {
 public:
  struct BindCall {
    uintptr_t addr;
    size_t bytes;
    int node;  // Binding::node
    bool operator==(const BindCall&) const = default;
  };
  explicit FakeNuma(Topology t, int default_node = 0) : topology_(std::move(t)), default_node_(default_node) {}

  const Topology& topology() const override { return topology_; }
  Status QueryNodes(std::span<void* const> pages, std::span<int> nodes) override CAIRN_EXCLUDES(mu_);
  Status Bind(void* addr, size_t bytes, Binding b) override CAIRN_EXCLUDES(mu_);
  Status Unbind(void* addr, size_t bytes) override CAIRN_EXCLUDES(mu_);
  Result<std::vector<int>> GetAffinity(pid_t tid) override CAIRN_EXCLUDES(mu_);
  Status SetAffinity(pid_t tid, const std::vector<int>& cpus) override CAIRN_EXCLUDES(mu_);

  // Test setup and inspection.
  void Place(void* addr, size_t bytes, int node) CAIRN_EXCLUDES(mu_);  // as if first-touched there
  std::vector<BindCall> binds() const CAIRN_EXCLUDES(mu_);
  int unbinds() const CAIRN_EXCLUDES(mu_);
  int query_pages() const CAIRN_EXCLUDES(mu_);  // pages asked about so far
  // Every SetAffinity so far: (kernel thread id, cpus), in order.
  std::vector<std::pair<pid_t, std::vector<int>>> affinity_sets() const CAIRN_EXCLUDES(mu_);

 private:
  int NodeOf(uintptr_t page) const CAIRN_REQUIRES(mu_);
  Topology topology_;
  int default_node_;
  mutable Mutex mu_;
  std::map<uintptr_t, int> page_node_ CAIRN_GUARDED_BY(mu_);  // page address -> node
  std::map<pid_t, std::vector<int>> affinity_ CAIRN_GUARDED_BY(mu_);
  std::vector<BindCall> binds_ CAIRN_GUARDED_BY(mu_);
  std::vector<std::pair<pid_t, std::vector<int>>> affinity_sets_ CAIRN_GUARDED_BY(mu_);
  int unbinds_ CAIRN_GUARDED_BY(mu_) = 0;
  int query_pages_ CAIRN_GUARDED_BY(mu_) = 0;
};

}  // namespace cairn::os
