// Restore helper shared by the cache and file paths (restore.cpp,
// chain_restore.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/restore_target.hpp"
#include "format/layout.hpp"

namespace cairn::core {

// Checks that every target has a region of the same id and size in the layout
// (of a version, or of a chain's tip: a chain's region sets are equal) before
// anything is copied. Fills `index` with each target's region index.
// kSizeMismatch or kNotFound name the region and `label`.
Status MatchRegions(const format::Layout& layout, const std::vector<RestoreTarget>& targets,
                    const std::string& label, std::vector<uint32_t>* index);

}  // namespace cairn::core
