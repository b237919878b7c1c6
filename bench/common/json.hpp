// A small JSON value for cairn-bench's report (no external JSON library).
//
// Objects keep insertion order (the report reads top-down). Numbers are
// doubles or exact 64-bit integers; a non-finite double is written as null
// (JSON has no NaN/Inf). Strings are escaped per RFC 8259; bytes that are not
// valid UTF-8 (e.g. in a directory name) are written as U+FFFD so the output
// is always valid JSON.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cairn::bench {

class Json {
 public:
  enum class Type { kNull, kBool, kInt, kDouble, kString, kArray, kObject };

  Json() = default;  // null
  Json(std::nullptr_t) {}                                            // NOLINT
  Json(bool b) : type_(Type::kBool), b_(b) {}                        // NOLINT
  Json(int v) : type_(Type::kInt), i_(v) {}                          // NOLINT
  Json(int64_t v) : type_(Type::kInt), i_(v) {}                      // NOLINT
  // Above INT64_MAX (e.g. a wrapped-around counter) it is kept as a double, so
  // the anomaly shows as ~1.8e19 instead of a negative number.
  Json(uint64_t v)  // NOLINT
      : type_(v <= static_cast<uint64_t>(INT64_MAX) ? Type::kInt : Type::kDouble),
        i_(static_cast<int64_t>(v)), d_(static_cast<double>(v)) {}
  Json(double v) : type_(Type::kDouble), d_(v) {}                    // NOLINT
  Json(std::optional<double> v) { if (v) { type_ = Type::kDouble; d_ = *v; } }  // NOLINT
  Json(const char* s) : type_(Type::kString), s_(s) {}               // NOLINT
  Json(std::string s) : type_(Type::kString), s_(std::move(s)) {}    // NOLINT
  static Json Array() { Json j; j.type_ = Type::kArray; return j; }
  static Json Object() { Json j; j.type_ = Type::kObject; return j; }

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_number() const { return type_ == Type::kInt || type_ == Type::kDouble; }
  // Precondition: is_number().
  double number() const { return type_ == Type::kInt ? static_cast<double>(i_) : d_; }
  const std::string& string() const { return s_; }
  bool boolean() const { return b_; }

  // Object: sets `key` (replacing an existing member in place). Returns *this.
  Json& Set(std::string_view key, Json value);
  // Array: appends. Returns *this.
  Json& Push(Json value);
  // Object members / array elements in order.
  const std::vector<std::pair<std::string, Json>>& members() const { return members_; }
  const std::vector<Json>& elements() const { return elements_; }

  // The member at a dotted path ("forward.blocking_s"); nullptr if absent.
  const Json* Find(std::string_view path) const;
  // The number at `path`, if there is one.
  std::optional<double> Number(std::string_view path) const;

  // Pretty-printed with two-space indentation, ending without a newline.
  std::string Dump() const;

 private:
  void DumpTo(std::string& out, int depth) const;

  Type type_ = Type::kNull;
  bool b_ = false;
  int64_t i_ = 0;
  double d_ = 0;
  std::string s_;
  std::vector<Json> elements_;
  std::vector<std::pair<std::string, Json>> members_;
};

// The JSON string literal for `s`, quotes included.
std::string JsonQuote(std::string_view s);

}  // namespace cairn::bench
