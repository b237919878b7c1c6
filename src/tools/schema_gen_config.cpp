// cairn_schema_gen's Python copies of include/cairn/config_keys.def: the
// keyword parameters of cairn.Client and their table in its docstring
// (bindings/python/cairn/_client.py), and the attributes of _cairn.Config
// (_cairn.pyi). A keyword's type follows its cairn::Config member's type,
// with the rule of the extension's KindOf (bindings/python/src/module.cpp):
// a string member named *_dir or *_path is a path, any other a word.
#include <algorithm>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>

#include "cairn/config.hpp"
#include "config/values.hpp"
#include "tools/schema_gen.hpp"

namespace cairn::schema_gen {
namespace {

// The keyword's annotation (None = the default's, the configuration's value).
template <typename T>
const char* KeywordType(std::string_view member) {
  if constexpr (std::is_same_v<T, std::string>) {
    return member.ends_with("_dir") || member.ends_with("_path") ? "Optional[PathArg]"
                                                                 : "Optional[str]";
  } else if constexpr (std::is_same_v<T, bool>) {
    return "Optional[bool]";
  } else if constexpr (std::is_same_v<T, int>) {
    return "Optional[int]";
  } else if constexpr (std::is_same_v<T, uint64_t> || std::is_same_v<T, uint32_t>) {
    return "Union[int, str, None]";  // a size ("512MiB") or file mode ("0600")
  } else if constexpr (std::is_same_v<T, CacheInit>) {
    return "Optional[InitStrategy]";
  } else if constexpr (std::is_same_v<T, DeviceCacheInit>) {
    return "Optional[DeviceCacheInit]";
  } else if constexpr (std::is_same_v<T, ChangeDetection>) {
    return "Optional[ChangeMode]";
  } else if constexpr (std::is_same_v<T, CaptureMode>) {
    return "Optional[CaptureMode]";
  } else if constexpr (std::is_same_v<T, WriteProtectMode>) {
    return "Optional[WriteProtectMode]";
  } else if constexpr (std::is_same_v<T, L3Code>) {
    return "Optional[L3Code]";
  } else if constexpr (std::is_same_v<T, double>) {
    return "Optional[float]";
  } else {
    static_assert(sizeof(T) == 0, "a Config member of a type the generator does not know");
  }
}

// The attribute's type on _cairn.Config (enums read and write as names).
template <typename T>
const char* AttributeType() {
  if constexpr (std::is_same_v<T, bool>) return "bool";
  if constexpr (std::is_same_v<T, int> || std::is_same_v<T, uint64_t> ||
                std::is_same_v<T, uint32_t>)
    return "int";
  if constexpr (std::is_same_v<T, double>) return "float";
  return "str";
}

// "`"a"`, `"b"` or `"c"`": an enumerated key's spellings.
template <size_t N>
std::string OneOf(const char* const (&names)[N]) {
  std::string out;
  for (size_t i = 0; i < N; ++i) {
    out += (i == 0 ? "" : i + 1 == N ? " or " : ", ") + std::string("`\"") + names[i] + "\"`";
  }
  return out;
}

// The keyword's value as docs/python.md describes it.
template <typename T>
std::string KeywordValue(std::string_view member) {
  if constexpr (std::is_same_v<T, std::string>) {
    return member.ends_with("_dir") || member.ends_with("_path")
               ? "path (`str` or `os.PathLike`; relative paths are made absolute)"
               : "`str`";
  } else if constexpr (std::is_same_v<T, bool>) {
    return "`bool`";
  } else if constexpr (std::is_same_v<T, int>) {
    return "`int`";
  } else if constexpr (std::is_same_v<T, uint64_t>) {
    return "size: bytes (`int`) or a size string (`\"512MiB\"`, `\"4 GiB\"`)";
  } else if constexpr (std::is_same_v<T, uint32_t>) {
    return "file mode: `0o640` or `\"0640\"`";
  } else if constexpr (std::is_enum_v<T>) {
    return OneOf(config_values::EnumKey<T>::kNames);  // config_enums.def
  } else {
    return "a number (`int` or `float`)";
  }
}

}  // namespace

std::string PythonKeywordMarkdown() {
  std::ostringstream o;
  o << "| Keyword | Key ([config.md](config.md): its default and meaning) | Value "
       "|\n|---|---|---|\n";
#define CAIRN_CONFIG_KEY(section, key, member, lo, env, py, type, dflt, doc) \
  o << "| `" #py "` | `" #section "." #key "` | "                            \
    << KeywordValue<decltype(Config::member)>(#member) << " |\n";
#include "cairn/config_keys.def"
#undef CAIRN_CONFIG_KEY
  return o.str();
}

std::string PythonKeywords() {
  std::ostringstream o;
#define CAIRN_CONFIG_KEY(section, key, member, lo, env, py, type, dflt, doc) \
  o << "        " #py ": " << KeywordType<decltype(Config::member)>(#member) << " = None,\n";
#include "cairn/config_keys.def"
#undef CAIRN_CONFIG_KEY
  return o.str();
}

std::string PythonKeywordTable() {
  std::ostringstream o;
  const std::string rule =
      "    ============================  ================================================\n";
  o << rule << "    keyword                       key (docs/config.md: type, default, meaning)\n"
    << rule;
#define CAIRN_CONFIG_KEY(section, key, member, lo, env, py, type, dflt, doc)     \
  {                                                                              \
    std::string word = "``" #py "``";                                            \
    word.resize(std::max<size_t>(word.size() + 2, 30), ' ');                     \
    o << "    " << word << "``" #section "." #key "``"                           \
      << (*(env) ? std::string(", ``$") + (env) + "``" : std::string()) << "\n"; \
  }
#include "cairn/config_keys.def"
#undef CAIRN_CONFIG_KEY
  o << rule;
  return o.str();
}

std::string PyiConfig() {
  std::ostringstream o;
#define CAIRN_CONFIG_KEY(section, key, member, lo, env, py, type, dflt, doc) \
  o << "    " #member ": " << AttributeType<decltype(Config::member)>() << "\n";
#include "cairn/config_keys.def"
#undef CAIRN_CONFIG_KEY
  return o.str();
}

}  // namespace cairn::schema_gen
