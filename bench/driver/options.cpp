// Command line of cairn-bench -> Options, from the option table
// (option_table.hpp). Every problem is a kInvalidArgument Status whose
// message names the option; main() prints it and exits 2.
#include <string>
#include <string_view>
#include <vector>

#include "common/parse.hpp"
#include "driver/bench.hpp"
#include "driver/option_table.hpp"

namespace cairn::bench {
namespace {

constexpr size_t kHelpColumn = 21;  // where the usage's texts start
constexpr size_t kWidth = 79;

// `text` wrapped at kWidth, each line but the first indented to kHelpColumn;
// `line` holds what the first line starts with.
std::string Wrap(std::string line, std::string_view text) {
  std::string out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find(' ', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view word = text.substr(at, end - at);
    if (line.size() + 1 + word.size() > kWidth && line.size() > kHelpColumn) {
      out += line + "\n";
      line = std::string(kHelpColumn, ' ');
    } else if (line.size() > kHelpColumn && line.back() != ' ') {
      line += ' ';
    }
    line += word;
    at = end + 1;
  }
  return out + line + "\n";
}

std::string OptionLines() {
  std::string out;
  for (const OptionRow& r : OptionTable()) {
    if (r.help == nullptr) continue;  // hidden
    std::string head =
        std::string("  ") + r.name + (r.arg != nullptr ? std::string(" ") + r.arg : "");
    head += head.size() + 2 <= kHelpColumn ? std::string(kHelpColumn - head.size(), ' ') : "  ";
    std::string help = r.help;
    if (*r.deflt != '\0') {
      help += "; default ";
      for (const char* c = r.deflt; *c != '\0'; ++c) {
        if (*c != '`') help += *c;  // Markdown in the docs' column
      }
    }
    out += Wrap(head, help);
  }
  return out;
}

// A Markdown table cell: '|' escaped.
std::string Cell(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

const char* WorkloadName(Workload w) {
  switch (w) {
    case Workload::kUniform: return "uniform";
    case Workload::kTrace: return "trace";
    case Workload::kRestart: return "restart";
  }
  return "?";
}

bool SyncFsyncDefault(Workload w) { return w == Workload::kRestart; }

const char* UsageText() {
  static const std::string text = std::string(R"(usage: cairn-bench [WORKLOAD] [options]

Workloads (HiPC'22 evaluation, see docs/bench.md):
  uniform        forward pass of --count checkpoints of --size, then restore
                 them in reverse order (adjoint pattern; the default)
  trace FILE     same, sizes (and optional per-step compute ms) from FILE
  restart        checkpoint --count versions of one --size region, wait,
                 Latest, Restore and verify (fault-tolerance pattern), then
                 restart in a new process from cold files and verify

Options:
)") + OptionLines() + R"(
Sizes take B, KiB, MiB, GiB (e.g. 64MiB). Exit: 0 ok, 1 failure or wrong
data, 2 usage error.
)";
  return text.c_str();
}

std::string OptionsMarkdown() {
  std::string out = "| option | default | meaning |\n|---|---|---|\n";
  for (const OptionRow& r : OptionTable()) {
    if (r.help == nullptr) continue;  // hidden
    const std::string name =
        std::string(r.name) + (r.arg != nullptr ? std::string(" ") + r.arg : "");
    out += "| `" + Cell(name) + "` | " + Cell(r.deflt) + " | " +
           Cell(r.doc != nullptr ? r.doc : r.help) + " |\n";
  }
  return out;
}

namespace {

// The workload and its file from the positional arguments, the checks
// across options, and the defaults that depend on the workload.
Result<Options> Finish(ParseState& p, const std::vector<std::string>& positional) {
  size_t next = 0;
  if (next < positional.size()) {
    const std::string& w = positional[next++];
    if (w == "uniform")
      p.o.workload = Workload::kUniform;
    else if (w == "trace")
      p.o.workload = Workload::kTrace;
    else if (w == "restart")
      p.o.workload = Workload::kRestart;
    else if (w == "restart-child") {  // hidden: spawned by the restart workload
      p.o.workload = Workload::kRestart;
      p.o.restart_child = true;
    }
    else return Bad(w, "unknown workload (expected uniform, trace or restart)");
  }
  if (p.o.workload == Workload::kTrace) {
    if (next >= positional.size()) return Bad("trace", "needs a FILE");
    p.o.trace_path = positional[next++];
    if (p.size_given) return Bad("--size", "does not apply to trace (sizes come from the file)");
  }
  if (next < positional.size()) return Bad(positional[next], "unexpected argument");

  if (p.o.forward_only && p.o.workload == Workload::kRestart) {
    return Bad("--forward-only", "applies to uniform and trace only");
  }
  if (p.child_given != p.o.restart_child ||
      (p.o.restart_child && (p.o.child_lib_dir.empty() || p.o.child_report.empty()))) {
    return Bad("restart-child", "is spawned by the restart workload, with all its --child-* options");
  }
  if (p.changes_given && p.o.workload != Workload::kRestart) {
    return Bad("--changes/--change-*/--max-layers/--track-loop", "apply to restart only");
  }
  if (!p.o.persistent_dir.empty() && p.o.workload != Workload::kRestart) {
    return Bad("--persistent", "applies to restart only");
  }
  p.o.sync_fsync = p.fsync_given.value_or(SyncFsyncDefault(p.o.workload));
  if (p.o.workload == Workload::kRestart) {
    if (!p.count_given) p.o.count = 4;
    if (!p.size_given) p.o.size = 1ull << 30;
    if (!p.interval_given) p.o.interval_ms = 200;
  } else if (p.o.workload == Workload::kTrace && !p.count_given) {
    p.o.count = 0;  // all of the file's steps
  }
  return p.o;
}

}  // namespace

Result<Options> ParseOptions(int argc, char** argv) {
  Options o;
  ParseState p{.o = o};
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.size() < 2 || arg[0] != '-') {
      positional.push_back(arg);
      continue;
    }
    // --name=value or --name value
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const OptionRow* row = name == "-h" ? FindOption("--help") : FindOption(name);
    if (row == nullptr) return Bad(name, "unknown option (see --help)");
    std::string value;
    if (row->arg == nullptr) {
      if (eq != std::string::npos) return Bad(name, "takes no value");
    } else if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return Bad(name, "needs a value");
    }
    CAIRN_RETURN_IF_ERROR(row->parse(p, name, value));
    if (o.help || o.help_markdown) return o;
  }
  return Finish(p, positional);
}

}  // namespace cairn::bench
