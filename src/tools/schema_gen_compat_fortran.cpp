// cairn_schema_gen's drop-in Fortran modules: FTI's and VELOC's modules
// (src/compat/fti/fti.f90, src/compat/veloc/veloc.f90) take a POINTER of any
// of their API's types in one generic each, one specific procedure per type
// (Fortran has no generics over types; each specific takes every rank, as an
// assumed-rank data(..)). The specifics, their interface lines and FTI's
// predefined types are written here from one table and one template each,
// into the modules' marked regions.
#include <sstream>
#include <string>

#include "tools/schema_gen.hpp"

namespace cairn::schema_gen {
namespace {

struct Type {
  const char* name;  // in the specific's name, and FTI's FTI_<name>
  const char* decl;  // the Fortran type
  int bytes;         // of one element (FTI's types; VELOC reads storage_size)
};

// FTI's predefined types that Cairn's module has (docs/fti.md, "Fortran").
constexpr Type kFtiTypes[] = {{"INTEGER4", "integer(4)", 4},
                              {"INTEGER8", "integer(8)", 8},
                              {"REAL4", "real(4)", 4},
                              {"REAL8", "real(8)", 8}};

// VELOC's Fortran types (its interfaceVeloc.F90).
constexpr Type kVelocTypes[] = {{"character", "character(len=*)", 1},
                                {"logical1", "logical(1)", 1},
                                {"integer1", "integer(1)", 1},
                                {"integer2", "integer(2)", 2},
                                {"integer4", "integer(4)", 4},
                                {"integer8", "integer(8)", 8},
                                {"real4", "real(4)", 4},
                                {"real8", "real(8)", 8},
                                {"complex4", "complex(4)", 8},
                                {"complex8", "complex(8)", 16}};

// One specific: subroutine `name`(id_F, data, err) over a POINTER `decl`
// of any rank (assumed rank) with the given intent, then `body`, which sets
// err.
void Specific(std::ostringstream& o, const std::string& name, const char* decl, const char* intent,
              const std::string& body) {
  o << "\n  subroutine " << name << "(id_F, data, err)\n"
    << "    integer, intent(in) :: id_F\n"
    << "    " << decl << ", pointer, intent(" << intent << ") :: data(..)\n"
    << "    integer, intent(out) :: err\n"
    << body << "  end subroutine " << name << "\n";
}

}  // namespace

std::string FtiTypeDeclarations() {
  std::ostringstream o;
  for (const Type& t : kFtiTypes) o << "  type(FTI_type), public, save :: FTI_" << t.name << "\n";
  return o.str();
}

std::string FtiInitTypes() {
  std::ostringstream o;
  for (const Type& t : kFtiTypes) {
    o << "    call FTI_InitType(FTI_" << t.name << ", " << t.bytes << ", err)\n"
      << "    if (err /= FTI_SCES) return\n";
  }
  return o.str();
}

std::string FtiInterface(const std::string& generic) {
  std::ostringstream o;
  for (const Type& t : kFtiTypes) o << "    module procedure " << generic << "_" << t.name << "\n";
  return o.str();
}

std::string FtiProtectSpecifics() {
  std::ostringstream o;
  for (const Type& t : kFtiTypes) {
    Specific(
        o, std::string("FTI_Protect_") + t.name, t.decl, "in",
        std::string("    err = protect_contiguous(id_F, c_loc(data), size(data, kind=8), FTI_") +
            t.name + ")\n");
  }
  return o.str();
}

std::string FtiReallocSpecifics() {
  std::ostringstream o;
  for (const Type& t : kFtiTypes) {
    const std::string each = std::to_string(t.bytes);
    Specific(o, std::string("FTI_Realloc_") + t.name, t.decl, "inout",
             "    type(c_ptr) :: moved\n"
             "    integer(8) :: n\n"
             "    err = FTI_NSCS\n"
             "    select rank (data)\n"
             "    rank (0)\n"
             "      n = realloc_first(id_F, c_loc(data), " +
                 each +
                 ", 1_8, moved)\n"
                 "      if (n == 1) call c_f_pointer(moved, data)\n"
                 "    rank (1)\n"
                 "      n = realloc_first(id_F, c_loc(data), " +
                 each +
                 ", -1_8, moved)\n"
                 "      if (n >= 0) call c_f_pointer(moved, data, [n])\n"
                 "    rank default\n"
                 "      n = -1\n"
                 "    end select\n"
                 "    if (n >= 0) err = FTI_SCES\n");
  }
  return o.str();
}

std::string VelocInterfaces() {
  std::ostringstream o;
  for (const Type& t : kVelocTypes) o << "    module procedure protect_" << t.name << "\n";
  return o.str();
}

std::string VelocSpecifics() {
  std::ostringstream o;
  for (const Type& t : kVelocTypes) {
    Specific(o, std::string("protect_") + t.name, t.decl, "in",
             "    err = VELOC_NSCS\n"
             "    if (refused(id_F, associated(data), is_contiguous(data))) return\n"
             "    err = protect_pointer(id_F, c_loc(data), size(data, kind=8), storage_size(data, "
             "kind=8))\n");
  }
  return o.str();
}

}  // namespace cairn::schema_gen
