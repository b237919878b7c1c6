#!/usr/bin/env python3
"""libcairn.so exports its API and nothing else (ctest: exports).

Usage: exports_test.py NM LIBRARY_SO INCLUDE_DIR [HEADER...]

Without HEADERs the library is libcairn.so and its API is every header of
include/cairn but those of other libraries (OTHER_LIBRARIES); with HEADERs
(e.g. cairn_mpi.h for libcairn_mpi.so) only those.

The public API is what include/cairn marks CAIRN_EXPORT (include/cairn/export.h):
the C functions of cairn.h and the functions and classes that the C++ headers
declare in namespace cairn. The test fails when

  * the library exports a symbol that is none of these (an internal function,
    a class of cairn::core, cairn::os, ..., a Client::Impl member, a std:: or
    toml:: template instance), except the toolchain's symbols listed in
    TOOLCHAIN below;
  * a marked function or class exports nothing (hidden by mistake, or missing
    from src/cairn.map);
  * a public header declares a function at namespace scope without
    CAIRN_EXPORT.
"""
import pathlib
import re
import subprocess
import sys

# Symbols the linker itself may define in a shared library, and the version
# node of src/cairn.map (an absolute symbol named after the node).
TOOLCHAIN = {"_init", "_fini", "_edata", "_end", "__bss_start"}
VERSION_NODE = re.compile(r"CAIRN_(MPI_)?\d+\.\d+")
# Headers of the libraries built beside libcairn (checked by their own runs).
OTHER_LIBRARIES = {"cairn_mpi.h"}
# Prefixes of the demangler for the data that belongs to a class.
CLASS_DATA = ("typeinfo for ", "typeinfo name for ", "vtable for ", "VTT for ")


def public_names(include_dir, only):
    """(C functions, C++ names) marked CAIRN_EXPORT; errors for unmarked ones."""
    c_funcs, cxx_names, errors = set(), set(), []
    for header in sorted(pathlib.Path(include_dir, "cairn").glob("*.h*")):
        if header.name == "export.h":
            continue
        if (header.name not in only) if only else (header.name in OTHER_LIBRARIES):
            continue
        text = header.read_text()
        # Declarations start at column 0 (namespace bodies are not indented);
        # join each with its continuation lines up to ';' or '{'.
        for m in re.finditer(r"^(?![#/\s}*]|namespace\b|template\b|typedef\b|enum\b)"
                             r"([^;{]*)[;{]", text, re.MULTILINE):
            decl = " ".join(m.group(1).split())
            cls = re.match(r"(?:class|struct)\s+(?:\[\[\w+\]\]\s*)?(CAIRN_EXPORT\s+)?(\w+)$", decl)
            if cls:
                if cls.group(1):
                    cxx_names.add(cls.group(2))
                continue
            fn = re.search(r"(\w+)\s*\(", decl)
            if not fn:
                continue
            if not decl.startswith("CAIRN_EXPORT "):
                errors.append(f"{header.name}: '{decl}' is public but not CAIRN_EXPORT")
            elif fn.group(1).startswith("cairn_"):
                c_funcs.add(fn.group(1))
            else:
                cxx_names.add(fn.group(1))
    return c_funcs, cxx_names, errors


def exported(nm, lib):
    """[(raw, demangled)] of the dynamic symbols lib defines, versions stripped."""
    def run(*flags):
        out = subprocess.run([nm, "-D", "--defined-only", *flags, lib], check=True,
                             capture_output=True, text=True).stdout
        return [re.sub(r"@.*$", "", line.split(" ", 2)[2]) for line in out.splitlines()
                if line.count(" ") >= 2]
    raw, demangled = run(), run("--demangle")
    if len(raw) != len(demangled):
        sys.exit(f"exports: nm listed {len(raw)} symbols, demangled {len(demangled)}")
    return list(zip(raw, demangled))


def owner(c_funcs, cxx_names, raw, name):
    """The public name that symbol belongs to, or None."""
    if raw in c_funcs:
        return raw
    for prefix in CLASS_DATA:
        if name.startswith(prefix):
            name = name[len(prefix):]
            break
    # The qualified name: up to the parameter list or the ABI tag.
    qualified = re.split(r"[(\[]", name, maxsplit=1)[0]
    m = re.fullmatch(r"cairn::(\w+)(::.*)?", qualified)
    if not m or m.group(1) not in cxx_names:
        return None
    if m.group(2) and re.search(r"::Impl\b", m.group(2)):
        return None  # Client::Impl, History::Impl: private to the library
    return m.group(1)


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    nm, lib, include_dir = sys.argv[1:4]
    c_funcs, cxx_names, errors = public_names(include_dir, set(sys.argv[4:]))
    if not c_funcs or not cxx_names:
        errors.append(f"no CAIRN_EXPORT declaration found under {include_dir}")
    symbols = exported(nm, lib)
    seen = set()
    for raw, name in symbols:
        if raw in TOOLCHAIN or VERSION_NODE.fullmatch(raw):
            continue
        public = owner(c_funcs, cxx_names, raw, name)
        if public is None:
            errors.append(f"exported but not public: {name}")
        else:
            seen.add(public)
    for missing in sorted((c_funcs | cxx_names) - seen):
        errors.append(f"public but not exported: {missing}")
    for e in errors:
        print("exports:", e)
    print(f"exports: {len(symbols)} dynamic symbols; public API: {len(c_funcs)} C functions, "
          f"{len(cxx_names)} C++ names; {len(errors)} problem(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
