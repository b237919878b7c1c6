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

// From include/cairn/config_keys.def (schema_gen_config.cpp): cairn.Client's
// keyword parameters (one line each, in the table's order), their table in
// its docstring, and _cairn.Config's attributes in _cairn.pyi.
std::string PythonKeywords();
std::string PythonKeywordTable();
std::string PyiConfig();
// The keywords' table in docs/python.md.
std::string PythonKeywordMarkdown();

// bindings/fortran: the generic array procedures' interface blocks and their
// specifics, one per kind and rank (schema_gen_fortran.cpp).
std::string FortranArrayInterfaces();
std::string FortranArrays();

// The drop-in APIs' Fortran modules (schema_gen_compat_fortran.cpp): FTI's
// predefined types, their FTI_InitType calls, the specifics of FTI_Protect
// and FTI_Realloc and their interface lines (`generic`: FTI_Protect or
// FTI_Realloc); VELOC_Mem_protect's specifics and interface lines.
std::string FtiTypeDeclarations();
std::string FtiInitTypes();
std::string FtiInterface(const std::string& generic);
std::string FtiProtectSpecifics();
std::string FtiReallocSpecifics();
std::string VelocInterfaces();
std::string VelocSpecifics();

}  // namespace cairn::schema_gen
