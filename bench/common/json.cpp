#include "common/json.hpp"

#include <cmath>
#include <cstdio>

namespace cairn::bench {
namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if it is not one
// (overlong forms, surrogates and code points above U+10FFFF are invalid).
size_t Utf8Length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  size_t len;
  uint32_t cp;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) { len = 2; cp = c & 0x1F; }
  else if (c >= 0xE0 && c <= 0xEF) { len = 3; cp = c & 0x0F; }
  else if (c >= 0xF0 && c <= 0xF4) { len = 4; cp = c & 0x07; }
  else return 0;
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return 0;
  if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
  return len;
}

void Indent(std::string& out, int depth) {
  out += '\n';
  out.append(static_cast<size_t>(depth) * 2, ' ');
}

}  // namespace

std::string JsonQuote(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; ++i; continue;
      case '\\': out += "\\\\"; ++i; continue;
      case '\b': out += "\\b"; ++i; continue;
      case '\f': out += "\\f"; ++i; continue;
      case '\n': out += "\\n"; ++i; continue;
      case '\r': out += "\\r"; ++i; continue;
      case '\t': out += "\\t"; ++i; continue;
      default: break;
    }
    if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
      ++i;
      continue;
    }
    const size_t len = Utf8Length(s, i);
    if (len == 0) {
      out += "\\ufffd";  // not UTF-8: keep the output valid JSON
      ++i;
    } else {
      out.append(s.substr(i, len));
      i += len;
    }
  }
  out += '"';
  return out;
}

Json& Json::Set(std::string_view key, Json value) {
  for (auto& [k, v] : members_) {
    if (k == key) {
      v = std::move(value);
      return *this;
    }
  }
  members_.emplace_back(std::string(key), std::move(value));
  return *this;
}

Json& Json::Push(Json value) {
  elements_.push_back(std::move(value));
  return *this;
}

const Json* Json::Find(std::string_view path) const {
  const Json* cur = this;
  while (cur != nullptr) {
    const size_t dot = path.find('.');
    const std::string_view head = path.substr(0, dot);
    const Json* next = nullptr;
    if (cur->type_ == Type::kObject) {
      for (const auto& [k, v] : cur->members_) {
        if (k == head) next = &v;
      }
    }
    cur = next;
    if (dot == std::string_view::npos) break;
    path.remove_prefix(dot + 1);
  }
  return cur;
}

std::optional<double> Json::Number(std::string_view path) const {
  const Json* j = Find(path);
  if (j == nullptr || !j->is_number()) return std::nullopt;
  if (j->type_ == Type::kDouble && !std::isfinite(j->d_)) return std::nullopt;
  return j->number();
}

std::string Json::Dump() const {
  std::string out;
  DumpTo(out, 0);
  return out;
}

void Json::DumpTo(std::string& out, int depth) const {
  switch (type_) {
    case Type::kNull: out += "null"; return;
    case Type::kBool: out += b_ ? "true" : "false"; return;
    case Type::kInt: out += std::to_string(i_); return;
    case Type::kDouble: {
      if (!std::isfinite(d_)) {
        out += "null";
        return;
      }
      // 6 significant digits: timings and bandwidths are far noisier than that.
      // %g output ("1.5e-05", "42") is valid JSON for finite values.
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.6g", d_);
      out += buf;
      return;
    }
    case Type::kString: out += JsonQuote(s_); return;
    case Type::kArray: {
      if (elements_.empty()) {
        out += "[]";
        return;
      }
      // Arrays of numbers stay on one line (per-trial figures are short).
      bool flat = true;
      for (const Json& e : elements_) flat = flat && (e.is_number() || e.is_null());
      out += '[';
      for (size_t i = 0; i < elements_.size(); ++i) {
        if (i > 0) out += flat ? ", " : ",";
        if (!flat) Indent(out, depth + 1);
        elements_[i].DumpTo(out, depth + 1);
      }
      if (!flat) Indent(out, depth);
      out += ']';
      return;
    }
    case Type::kObject: {
      if (members_.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      for (size_t i = 0; i < members_.size(); ++i) {
        if (i > 0) out += ',';
        Indent(out, depth + 1);
        out += JsonQuote(members_[i].first);
        out += ": ";
        members_[i].second.DumpTo(out, depth + 1);
      }
      Indent(out, depth);
      out += '}';
      return;
    }
  }
}

}  // namespace cairn::bench
