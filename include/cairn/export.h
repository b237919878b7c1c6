/* Cairn: which declarations are part of the shared library's ABI.
 *
 * libcairn is compiled with hidden symbol visibility (-fvisibility=hidden,
 * -fvisibility-inlines-hidden): only declarations marked CAIRN_EXPORT are
 * exported from libcairn.so, and src/cairn.map then exports only cairn_* and
 * the cairn:: C++ API from those (it drops the std:: and toml:: template
 * instances the compiler emits with default visibility). Mark every public
 * function and every public class with out-of-line members, in the public
 * headers (include/cairn) only; tests/exports_test.py checks the result.
 *
 * CAIRN_BUILDING_LIBRARY is defined (privately) for Cairn's own sources only.
 * The same objects make libcairn.so and libcairn.a: in the archive the marked
 * symbols keep default visibility and everything else is hidden, which links
 * into executables exactly as before (visibility only matters to the dynamic
 * linker). Consumers see an empty macro: ELF needs nothing on the import side.
 * Like leveldb's LEVELDB_EXPORT (include/leveldb/export.h).
 */
#ifndef CAIRN_EXPORT_H_
#define CAIRN_EXPORT_H_

#if !defined(CAIRN_EXPORT)
#if defined(CAIRN_BUILDING_LIBRARY) && (defined(__GNUC__) || defined(__clang__))
#if defined(__cplusplus)
/* The standard spelling, so that it may follow [[nodiscard]] on a class. */
#define CAIRN_EXPORT [[gnu::visibility("default")]]
#else
#define CAIRN_EXPORT __attribute__((visibility("default")))
#endif
#else
#define CAIRN_EXPORT
#endif
#endif

#endif /* CAIRN_EXPORT_H_ */
