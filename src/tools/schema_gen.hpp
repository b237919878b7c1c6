// cairn_schema_gen's parts (cairn_schema_gen.cpp runs them): the tables of
// include/cairn/*.def as the generator reads them, and the writers that live
// in files of their own.
#pragma once

#include <string>
#include <vector>

namespace cairn::schema_gen {

// One row of include/cairn/cairn_stats.def.
struct Stat {
  const char* kind;  // U64, F64, WHEN, FLAG, ENUM, RATIO; TEXT for CAIRN_STAT_TEXT
  const char* name;
  const char* doc;
};

// bindings/python/cairn/_stats.py from every row, CAIRN_STAT_TEXT's
// included, in the table's order (schema_gen_stats.cpp).
std::string PythonStats(const std::vector<Stat>& stats);

}  // namespace cairn::schema_gen
