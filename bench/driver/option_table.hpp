// cairn-bench's options, declared once (option_table.cpp): each row is an
// option's name, its argument, how its value is parsed, and its text for the
// usage (--help) and for docs/bench.md's options table (--help-markdown,
// checked against the document by BenchSmokeTest.OptionsTableInDocsIsCurrent).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "cairn/status.hpp"
#include "driver/bench.hpp"

namespace cairn::bench {

// What ParseOptions learns besides the Options: which defaults a workload
// may still set, and whether options that belong to one workload were given.
struct ParseState {
  Options& o;
  bool count_given = false, size_given = false, interval_given = false;
  std::optional<bool> fsync_given;
  bool child_given = false;    // a hidden --child-* option (restart-child)
  bool changes_given = false;  // a restart-only changed-data option
};

struct OptionRow {
  const char* name;   // "--count"
  const char* arg;    // its argument ("N", "on|off"); nullptr: a flag
  const char* deflt;  // the docs' default column ("": none)
  const char* help;   // the usage text (plain); nullptr: a hidden option
  const char* doc;    // the docs' text (Markdown); nullptr: the usage text
  Status (*parse)(ParseState& p, std::string_view name, const std::string& value);
};

std::span<const OptionRow> OptionTable();
const OptionRow* FindOption(std::string_view name);

}  // namespace cairn::bench
