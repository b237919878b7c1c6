// cairn_schema_gen's Python statistics: bindings/python/cairn/_stats.py, the
// dataclasses of cairn.Stats, from include/cairn/cairn_stats.def. A row's
// name is its path in cairn::Stats with '.' written '_': a name that starts
// with a group's prefix (init_, device_, ...) is a field of that group's
// class, and rows X_bytes, X_ops, X_seconds in a row are one TierStats X.
// What the table cannot say (the classes' names and docstrings, their
// methods) is here, once.
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "tools/schema_gen.hpp"

namespace cairn::schema_gen {
namespace {

struct Row {
  std::string kind;  // U64, F64, WHEN, FLAG, ENUM, RATIO, TEXT
  std::string name;  // without its group's prefix
  std::string doc;
};

struct Group {
  const char* prefix;  // of the rows' names ("" = Stats itself)
  const char* field;   // Stats' field
  const char* cls;
  const char* doc;      // the class docstring
  const char* summary;  // Stats' field's comment
  std::vector<Row> rows;
};

std::vector<Group> Groups() {
  return {
      {"init_",
       "init",
       "InitStats",
       "Fast initialization of the host cache (``cairn::InitStats``). Times are\n"
       "    seconds since the client was opened; ``None`` = not (yet) happened.",
       "how the host cache was prepared (host_cache.init)",
       {}},
      {"device_",
       "device",
       "DeviceStats",
       "The GPU tier (``cairn::DeviceStats``, docs/gpu.md): the device cache\n"
       "    (``device_cache``) and the traffic of device and managed regions. Counters\n"
       "    are 0 when no device cache and no device region were used.",
       "the GPU tier (device_cache)",
       {}},
      {"changes_",
       "changes",
       "ChangeStats",
       "Change detection (``cairn::ChangeStats``; ``checkpoint.changes``,\n"
       "    docs/design.md \"Layered captures\"). Zero with ``changes = \"full\"``.",
       "change detection (checkpoint.changes)",
       {}},
      {"mpi_",
       "mpi",
       "MpiStats",
       "The redundancy levels of a client opened in an MPI group\n"
       "    (``cairn::MpiStats``; docs/mpi.md). Zero for a client opened alone.",
       "redundancy levels of an MPI client (docs/mpi.md)",
       {}},
      {"zero_copy_",
       "zero_copy",
       "ZeroCopyStats",
       "Zero-copy captures (``cairn::ZeroCopyStats``; ``checkpoint.capture``,\n"
       "    docs/design.md \"Zero-copy captures\"). Zero in copy mode.",
       "zero-copy captures (checkpoint.capture)",
       {}},
      {"interval_",
       "interval",
       "IntervalStats",
       "The optimal checkpoint interval (``cairn::IntervalStats``;\n"
       "    :meth:`Client.checkpoint_due`, docs/design.md \"When to checkpoint\"): the\n"
       "    last decision, for the name it was asked about. Zero before the first\n"
       "    call that found a measured checkpoint.",
       "the optimal checkpoint interval (checkpoint_due)",
       {}},
      {"",
       "",
       "Stats",
       "A snapshot of a client's statistics (``cairn::Stats``; docs/stats.md).",
       "",
       {}},
  };
}

// What the classes add to their fields.
constexpr const char* kTierMethods = R"(
    @property
    def gbps(self) -> float:
        """Bandwidth in GB/s (1e9 bytes) over the busy time; 0 when idle."""
        return self.bytes / self.seconds / 1e9 if self.seconds > 0 else 0.0
)";

constexpr const char* kStatsMethods = R"(
    @property
    def capture_blocked_seconds(self) -> float:
        """The documented earlier name of :attr:`capture_blocked_s`."""
        return self.capture_blocked_s

    @property
    def hit_ratio(self) -> float:
        """cache_hits / (cache_hits + cache_misses); 0 before any read."""
        reads = self.cache_hits + self.cache_misses
        return self.cache_hits / reads if reads else 0.0

    def as_dict(self) -> Dict[str, Any]:
        """The statistics as nested dicts (for JSON)."""
        return asdict(self)

    @classmethod
    def _from_dict(cls, d: Mapping[str, Union[int, float, str]]) -> "Stats":
        return build_stats(cls, d, _NESTED)
)";

const char* PythonType(const std::string& kind) {
  if (kind == "U64") return "int";
  if (kind == "WHEN") return "Optional[float]";
  if (kind == "F64" || kind == "RATIO") return "float";
  if (kind == "FLAG") return "bool";
  return "str";  // ENUM (its name), TEXT
}

bool EndsWith(const std::string& s, const char* tail) {
  const size_t n = std::strlen(tail);
  return s.size() >= n && s.compare(s.size() - n, n, tail) == 0;
}

// The group rows' fields: a TierStats for each X_bytes, X_ops, X_seconds run.
void WriteFields(std::ostringstream& o, const std::vector<Row>& rows) {
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    if (EndsWith(r.name, "_bytes") && i + 2 < rows.size()) {
      const std::string x = r.name.substr(0, r.name.size() - 6);
      if (rows[i + 1].name == x + "_ops" && rows[i + 2].name == x + "_seconds") {
        const size_t colon = r.doc.rfind(": ");
        o << "    " << x << ": TierStats  #: " << r.doc.substr(0, colon) << "\n";
        i += 2;
        continue;
      }
    }
    o << "    " << r.name << ": " << PythonType(r.kind) << "  #: " << r.doc << "\n";
  }
}

}  // namespace

std::string PythonStats(const std::vector<Stat>& stats) {
  std::vector<Group> groups = Groups();
  Group& top = groups.back();
  for (const Stat& s : stats) {
    const std::string name = s.name;
    Group* g = &top;
    for (size_t i = 0; i + 1 < groups.size(); ++i) {
      if (name.rfind(groups[i].prefix, 0) == 0) g = &groups[i];
    }
    if (g != &top && g->rows.empty())
      top.rows.push_back({"GROUP", g->field, std::string(g->cls) + "  #: " + g->summary});
    g->rows.push_back({s.kind, name.substr(std::strlen(g->prefix)), s.doc});
  }
  std::ostringstream o;
  o << "\"\"\"The statistics of a client (include/cairn/cairn_stats.def; docs/stats.md).\n\n"
       "Every field of the table under its C++ name: the table's name is the path\n"
       "(init_pinned_s = Stats.init.pinned_s). The extension returns them as one flat\n"
       "dict, which Stats._from_dict maps onto these classes by name, refusing any\n"
       "field a class lacks.\n\n"
       "Generated by cairn_schema_gen (src/tools/schema_gen_stats.cpp): do not edit.\n"
       "After changing the table: cmake --build build --target cairn_regenerate.\n\"\"\"\n\n"
       "from __future__ import annotations\n\n"
       "from dataclasses import asdict, dataclass\n"
       "from typing import Any, Dict, Mapping, Optional, Union\n\n"
       "from ._stats_build import build_stats\n\n\n"
       "@dataclass(frozen=True)\n"
       "class TierStats:\n"
       "    \"\"\"Traffic through one stage of the pipeline.\"\"\"\n\n"
       "    bytes: int  #: payload bytes moved\n"
       "    ops: int  #: versions/steps moved\n"
       "    seconds: float  #: busy time of the stage\n"
    << kTierMethods;
  for (const Group& g : groups) {
    o << "\n\n@dataclass(frozen=True)\nclass " << g.cls << ":\n    \"\"\"" << g.doc << "\"\"\"\n\n";
    std::vector<Row> rows;  // plain rows since the last group field
    for (const Row& r : g.rows) {
      if (r.kind != "GROUP") {
        rows.push_back(r);
        continue;
      }
      WriteFields(o, rows);
      rows.clear();
      o << "    " << r.name << ": " << r.doc << "\n";
    }
    WriteFields(o, rows);
    if (&g == &groups.back()) o << kStatsMethods;
  }
  o << "\n\n# The classes nested in Stats, by annotation (``from __future__ import\n"
       "# annotations`` makes them strings).\n"
       "_NESTED: Dict[str, type] = {\n    \"TierStats\": TierStats,\n";
  for (size_t i = 0; i + 1 < groups.size(); ++i)
    o << "    \"" << groups[i].cls << "\": " << groups[i].cls << ",\n";
  o << "}\n";
  return o.str();
}

}  // namespace cairn::schema_gen
