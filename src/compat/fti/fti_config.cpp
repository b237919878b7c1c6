// FTI's configuration keys, declared once (kKeys) and parsed from its INI
// file. FTI reads it with iniparser: sections and keys are case-insensitive,
// '#' and ';' start comments (also after a value).
#include "fti_config.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace cairn::fti {

namespace {

// What Cairn does with a key.
enum class Use {
  kMapped,   // read into FtiConfig
  kNoEffect, // valid FTI key, no effect in Cairn (the note says why)
};

struct Key {
  const char* section;
  const char* name;
  Use use;
  const char* note;  // kNoEffect: why
};

// Every key of FTI 1.6's config.fti (and its docs), by section.
constexpr Key kKeys[] = {
    {"basic", "head", Use::kMapped, ""},
    {"basic", "node_size", Use::kMapped, ""},
    {"basic", "ckpt_dir", Use::kMapped, ""},
    {"basic", "glbl_dir", Use::kMapped, ""},
    {"basic", "meta_dir", Use::kNoEffect, "Cairn keeps its metadata inside the checkpoint files and manifests"},
    {"basic", "ckpt_l1", Use::kMapped, ""},
    {"basic", "ckpt_l2", Use::kMapped, ""},
    {"basic", "ckpt_l3", Use::kMapped, ""},
    {"basic", "ckpt_l4", Use::kMapped, ""},
    {"basic", "dcp_l4", Use::kNoEffect, "differential checkpoints apply to every level when enable_dcp = 1"},
    {"basic", "inline_l2", Use::kNoEffect, "without head ranks every level is inline, as in FTI"},
    {"basic", "inline_l3", Use::kNoEffect, "without head ranks every level is inline, as in FTI"},
    {"basic", "inline_l4", Use::kNoEffect, "without head ranks every level is inline; Cairn copies to glbl_dir in the background anyway"},
    {"basic", "keep_last_ckpt", Use::kMapped, ""},
    {"basic", "keep_l4_ckpt", Use::kNoEffect, "Cairn's retention (retention.keep_versions, CAIRN_KEEP) decides how many versions stay"},
    {"basic", "group_size", Use::kMapped, ""},
    {"basic", "max_sync_intv", Use::kNoEffect, "FTI_Snapshot agrees on the elapsed time at every call"},
    {"basic", "ckpt_io", Use::kNoEffect, "Cairn writes its own file format (docs/format.md) whatever the I/O mode"},
    {"basic", "enable_staging", Use::kMapped, ""},
    {"basic", "enable_dcp", Use::kMapped, ""},
    {"basic", "dcp_mode", Use::kNoEffect, "Cairn hashes chunks with its own hash (XXH3-128)"},
    {"basic", "dcp_block_size", Use::kMapped, ""},
    {"basic", "dcp_stack_size", Use::kMapped, ""},
    {"basic", "cacheddcp", Use::kNoEffect, "Cairn hashes the protected memory where it is (device regions on the device)"},
    {"basic", "fast_forward", Use::kNoEffect, "checkpoint intervals are not scaled"},
    {"basic", "glbl_stash_dir", Use::kNoEffect, "Cairn keeps no stash of global checkpoints besides retention"},
    {"basic", "max_var_id", Use::kNoEffect, "dataset ids go up to 2147483631 without a bound to set"},
    {"basic", "verbosity", Use::kMapped, ""},
    {"basic", "keep_heads_alive", Use::kNoEffect, "there are no head ranks"},
    {"basic", "gpu_host_bufsize", Use::kNoEffect, "Cairn sizes its device staging by device_cache.* (docs/config.md)"},
    {"basic", "enable_icp", Use::kNoEffect, "incremental checkpoints (FTI_InitICP) are not provided"},
    {"basic", "h5_single_file_enable", Use::kNoEffect, "the HDF5 layout is not provided"},
    {"basic", "h5_single_file_dir", Use::kNoEffect, "the HDF5 layout is not provided"},
    {"basic", "h5_single_file_prefix", Use::kNoEffect, "the HDF5 layout is not provided"},
    {"basic", "h5_single_file_keep", Use::kNoEffect, "the HDF5 layout is not provided"},
    {"basic", "h5_single_file_inline", Use::kNoEffect, "the HDF5 layout is not provided"},
    {"basic", "transfer_size", Use::kNoEffect, "Cairn's block size is host_cache.block_size"},
    {"restart", "failure", Use::kNoEffect, "a restart is detected from the checkpoints present, not from this flag"},
    {"restart", "exec_id", Use::kNoEffect, "a restart is detected from the checkpoints present, not from this id"},
    {"injection", "rank", Use::kNoEffect, "failure injection (FTI_BitFlip) is not provided"},
    {"injection", "number", Use::kMapped, ""},
    {"injection", "position", Use::kNoEffect, "failure injection (FTI_BitFlip) is not provided"},
    {"injection", "frequency", Use::kNoEffect, "failure injection (FTI_BitFlip) is not provided"},
    {"injection", "index", Use::kNoEffect, "failure injection (FTI_BitFlip) is not provided"},
    {"advanced", "block_size", Use::kNoEffect, "Cairn's block size is host_cache.block_size"},
    {"advanced", "fast_forward", Use::kNoEffect, "checkpoint intervals are not scaled"},
    {"advanced", "transfer_size", Use::kNoEffect, "Cairn's block size is host_cache.block_size"},
    {"advanced", "mpi_tag", Use::kNoEffect, "Cairn's messages travel on a communicator of their own"},
    {"advanced", "general_tag", Use::kNoEffect, "Cairn's messages travel on a communicator of their own"},
    {"advanced", "ckpt_tag", Use::kNoEffect, "Cairn's messages travel on a communicator of their own"},
    {"advanced", "stage_tag", Use::kNoEffect, "Cairn's messages travel on a communicator of their own"},
    {"advanced", "final_tag", Use::kNoEffect, "Cairn's messages travel on a communicator of their own"},
    {"advanced", "local_test", Use::kMapped, ""},
    {"advanced", "lustre_striping_unit", Use::kNoEffect, "Lustre striping is left to the file system's defaults"},
    {"advanced", "lustre_stiping_unit", Use::kNoEffect, "Lustre striping is left to the file system's defaults (FTI 1.6 reads this spelling)"},
    {"advanced", "lustre_stiping_factor", Use::kNoEffect, "Lustre striping is left to the file system's defaults (FTI 1.6 reads this spelling)"},
    {"advanced", "lustre_stiping_offset", Use::kNoEffect, "Lustre striping is left to the file system's defaults (FTI 1.6 reads this spelling)"},
    {"advanced", "lustre_striping_factor", Use::kNoEffect, "Lustre striping is left to the file system's defaults"},
    {"advanced", "lustre_striping_offset", Use::kNoEffect, "Lustre striping is left to the file system's defaults"},
    // Cairn's extension (docs/fti.md, "FTI_Snapshot"): the optimal interval.
    {"cairn", "auto_level", Use::kMapped, ""},
    {"cairn", "mtbf_s", Use::kMapped, ""},
};

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string Trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  size_t b = s.find_last_not_of(" \t\r");
  return s.substr(a, b - a + 1);
}

const Key* Find(const std::string& section, const std::string& name) {
  for (const Key& k : kKeys) {
    if (section == k.section && name == k.name) return &k;
  }
  return nullptr;
}

// A whole number in [lo, hi].
Result<int> Int(const std::string& where, const std::string& v, long lo, long hi) {
  errno = 0;
  char* end = nullptr;
  long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || n < lo || n > hi) {
    return Status::Config(where + " is '" + v + "'; it must be a whole number from " +
                          std::to_string(lo) + " to " + std::to_string(hi));
  }
  return static_cast<int>(n);
}

// Applies one mapped key.
Status Apply(FtiConfig* c, const std::string& key, const std::string& v, const std::string& where) {
  auto set = [&](auto* field, long lo, long hi) -> Status {
    CAIRN_ASSIGN_OR_RETURN(int n, Int(where, v, lo, hi));
    *field = n;
    return Status::Ok();
  };
  auto flag = [&](bool* field) -> Status {
    CAIRN_ASSIGN_OR_RETURN(int n, Int(where, v, 0, 1));
    *field = n != 0;
    return Status::Ok();
  };
  if (key == "head") {
    CAIRN_ASSIGN_OR_RETURN(int n, Int(where, v, 0, 1));
    if (n == 1) {
      return Status::Config(where + " = 1 asks for a dedicated FTI head rank per node; Cairn does not "
                            "provide them: its background threads do the heads' work (flushes, "
                            "persistent copies) inside every rank, so set head = 0 (docs/fti.md)");
    }
    return Status::Ok();
  }
  if (key == "node_size") return set(&c->node_size, 1, INT_MAX);
  if (key == "group_size") return set(&c->group_size, 1, INT_MAX);
  if (key == "ckpt_dir" || key == "glbl_dir") {
    if (v.empty()) return Status::Config(where + " is empty; it must name a directory");
    (key == "ckpt_dir" ? c->ckpt_dir : c->glbl_dir) = v;
    return Status::Ok();
  }
  if (key.size() == 7 && key.starts_with("ckpt_l") && key[6] >= '1' && key[6] <= '4') {
    return set(&c->interval[static_cast<size_t>(key[6] - '1')], 0, INT_MAX);
  }
  if (key == "keep_last_ckpt") return flag(&c->keep_last_ckpt);
  if (key == "enable_dcp") return flag(&c->dcp);
  if (key == "dcp_block_size") return set(&c->dcp_block_size, 512, 65535);
  if (key == "dcp_stack_size") {  // as FTI: above 10 is a warning, and 5
    CAIRN_ASSIGN_OR_RETURN(int n, Int(where, v, 1, INT_MAX));
    if (n > 10) c->notes.push_back(where + " = " + v + " is above 10: 5 is used, as FTI does");
    c->dcp_stack_size = n > 10 ? 5 : n;
    return Status::Ok();
  }
  if (key == "verbosity") return set(&c->verbosity, 1, 4);
  if (key == "local_test") return flag(&c->local_test);
  if (key == "auto_level") return set(&c->auto_level, 0, 4);
  if (key == "mtbf_s") return set(&c->mtbf_s, 1, INT_MAX);
  if (key == "enable_staging") {
    CAIRN_ASSIGN_OR_RETURN(int n, Int(where, v, 0, 1));
    if (n == 1) {
      return Status::Config(where + " = 1: staging (FTI_SendFile) is not provided by libcairn_fti; "
                            "set enable_staging = 0 (docs/fti.md)");
    }
    return Status::Ok();
  }
  if (key == "number") {
    CAIRN_ASSIGN_OR_RETURN(int n, Int(where, v, 0, INT_MAX));
    if (n > 0) c->notes.push_back(where + " = " + v + ": failure injection is not provided; no bit-flips are injected");
    return Status::Ok();
  }
  return Status::Internal(where + ": mapped key without a handler");
}

}  // namespace

Result<FtiConfig> ParseConfig(const std::string& text, const std::string& path) {
  FtiConfig c;
  std::istringstream in(text);
  std::string line, section;
  bool have_ckpt = false, have_glbl = false;
  for (int no = 1; std::getline(in, line); ++no) {
    if (size_t h = line.find_first_of("#;"); h != std::string::npos) line.resize(h);
    line = Trim(line);
    if (line.empty()) continue;
    const std::string at = path + ":" + std::to_string(no) + ": ";
    if (line.front() == '[') {
      if (line.back() != ']') return Status::Config(at + "'" + line + "' is not a [section] line");
      section = Lower(Trim(line.substr(1, line.size() - 2)));
      if (std::none_of(std::begin(kKeys), std::end(kKeys), [&](const Key& k) { return section == k.section; })) {
        return Status::Config(at + "unknown section [" + section +
                              "]; FTI's are [basic], [restart], [injection] and [advanced], "
                              "and Cairn's own [cairn]");
      }
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == std::string::npos) return Status::Config(at + "'" + line + "' is not 'key = value'");
    if (section.empty()) return Status::Config(at + "key before any [section]");
    const std::string key = Lower(Trim(line.substr(0, eq)));
    const std::string value = Trim(line.substr(eq + 1));
    const Key* k = Find(section, key);
    const std::string where = at + "[" + section + "] " + key;
    if (k == nullptr) {
      std::string known;
      for (const Key& each : kKeys) {
        if (section == each.section) known += (known.empty() ? "" : ", ") + std::string(each.name);
      }
      return Status::Config(at + "unknown key '" + key + "' in [" + section + "] (known there: " + known + ")");
    }
    if (k->use == Use::kNoEffect) {
      c.notes.push_back("[" + section + "] " + key + " has no effect: " + k->note);
      continue;
    }
    CAIRN_RETURN_IF_ERROR(Apply(&c, key, value, where));
    have_ckpt |= key == "ckpt_dir";
    have_glbl |= key == "glbl_dir";
  }
  if (!have_ckpt || !have_glbl) {
    return Status::Config(path + ": [basic] " + (have_ckpt ? "glbl_dir" : "ckpt_dir") +
                          " is missing; FTI needs ckpt_dir (local checkpoints) and glbl_dir (level 4)");
  }
  return c;
}

Result<FtiConfig> LoadConfig(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Status::Config("cannot read the FTI configuration file '" + path + "'");
  std::stringstream text;
  text << f.rdbuf();
  return ParseConfig(text.str(), path);
}

}  // namespace cairn::fti
