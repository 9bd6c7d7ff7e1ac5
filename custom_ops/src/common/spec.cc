#include "common/spec.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace qg {

const char* AttributeKind(std::string_view name) {
  for (const auto& attribute : spec::kAttributes) {
    if (name == attribute.name) return attribute.kind;
  }
  throw std::logic_error("quantgraph: unknown attribute " + std::string(name));
}

bool OpHasAttribute(OpKind kind, std::string_view name) {
  const auto& info = Info(kind);
  for (int i = 0; i < info.attribute_count; ++i) {
    if (name == info.attributes[i]) return true;
  }
  return false;
}

bool HasQtype(OpKind kind, std::string_view qtype) {
  const auto& info = Info(kind);
  for (int i = 0; i < info.qtype_count; ++i) {
    if (qtype == info.qtypes[i]) return true;
  }
  return false;
}

std::string JoinQtypes(OpKind kind) {
  const auto& info = Info(kind);
  std::string out;
  for (int i = 0; i < info.qtype_count; ++i) {
    if (i > 0) out += ", ";
    out += info.qtypes[i];
  }
  return out;
}

std::string FormatRule(std::string_view rule_id, const RuleFields& fields) {
  const char* text = nullptr;
  for (const auto& rule : spec::kRules) {
    if (rule_id == rule.id) text = rule.text;
  }
  if (text == nullptr)
    throw std::logic_error("quantgraph: unknown rule id " + std::string(rule_id));
  std::string out;
  for (const char* p = text; *p != '\0';) {
    if (*p == '{') {
      const char* end = std::strchr(p, '}');
      if (end == nullptr)
        throw std::logic_error("quantgraph: bad rule template " + std::string(text));
      const std::string_view name(p + 1, static_cast<size_t>(end - p - 1));
      bool found = false;
      for (const auto& [key, value] : fields) {
        if (key == name) {
          out += value;
          found = true;
          break;
        }
      }
      if (!found) {
        throw std::logic_error("quantgraph: rule " + std::string(rule_id) + " needs field " +
                               std::string(name));
      }
      p = end + 1;
    } else {
      out += *p++;
    }
  }
  return out;
}

void ThrowRule(OpKind op, std::string_view node, std::string_view rule_id,
               const RuleFields& fields) {
  std::string message = OpName(op);
  message += " node '";
  message += node;
  message += "': ";
  message += FormatRule(rule_id, fields);
  message += " [rule ";
  message += rule_id;
  message += "]";
  throw SpecError(std::move(message), std::string(rule_id));
}

const spec::DType* FindDType(int onnx) {
  for (const auto& d : spec::kDTypes) {
    if (d.onnx == onnx) return &d;
  }
  return nullptr;
}

std::string TypeName(int onnx) {
  if (const auto* d = FindDType(onnx)) return d->name;
  for (const auto& t : spec::kOnnxTypeNames) {
    if (t.onnx == onnx) return t.name;
  }
  std::string name = spec::kUnknownTypeName;
  const auto at = name.find("{onnx}");
  if (at != std::string::npos) name.replace(at, 6, std::to_string(onnx));
  return name;
}

std::string JoinTypeNames(const std::vector<int>& types) {
  std::string out;
  for (int t : types) {
    if (!out.empty()) out += ", ";
    out += TypeName(t);
  }
  return out;
}

namespace {

void AddUnique(std::vector<int>& v, int t) {
  for (int x : v) {
    if (x == t) return;
  }
  v.push_back(t);
}

bool RowOf(const spec::TypeRow& row, OpKind op) { return std::strcmp(row.op, OpName(op)) == 0; }

}  // namespace

std::vector<int> SrcTypes(OpKind op) {
  std::vector<int> out;
  for (const auto& row : spec::kTypeRows) {
    if (RowOf(row, op)) AddUnique(out, row.src);
  }
  return out;
}

std::vector<int> DstTypes(OpKind op, int src) {
  std::vector<int> out;
  for (const auto& row : spec::kTypeRows) {
    if (RowOf(row, op) && row.src == src) AddUnique(out, row.dst);
  }
  return out;
}

std::vector<int> ScalesTypes(OpKind op, int src, int dst) {
  std::vector<int> out;
  for (const auto& row : spec::kTypeRows) {
    if (RowOf(row, op) && row.src == src && row.dst == dst && row.scales != 0) {
      AddUnique(out, row.scales);
    }
  }
  return out;
}

std::vector<int> ZpsTypes(OpKind op, int src, int dst) {
  // As the reference: the zps list of the first matching row.
  for (const auto& row : spec::kTypeRows) {
    if (RowOf(row, op) && row.src == src && row.dst == dst) {
      return std::vector<int>(row.zps, row.zps + row.zps_count);
    }
  }
  return {};
}

std::string PyInt(int64_t v) { return std::to_string(v); }

std::string PyIntList(const int64_t* values, size_t count) {
  std::string out = "[";
  for (size_t i = 0; i < count; ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(values[i]);
  }
  return out + "]";
}

std::string PyFloat(float v) {
  // Python's repr of float(v): shortest round-trip digits, exponent form below 1e-4 and from
  // 1e16 on. (The scale-value rule reports zeros, infinities and NaN; finite values are here
  // for completeness.)
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  if (v == 0.0f) return std::signbit(v) ? "-0.0" : "0.0";
  const double d = static_cast<double>(v);
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*e", precision - 1, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  const std::string s(buf);  // [-]d[.ddd]e[+-]XX
  const size_t e = s.find('e');
  const bool negative = s[0] == '-';
  std::string digits;
  for (size_t i = negative ? 1 : 0; i < e; ++i) {
    if (s[i] != '.') digits += s[i];
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int exponent = std::atoi(s.c_str() + e + 1);
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    } else if (static_cast<size_t>(exponent) + 1 >= digits.size()) {
      out += digits + std::string(static_cast<size_t>(exponent) + 1 - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(exponent) + 1) + "." +
             digits.substr(static_cast<size_t>(exponent) + 1);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exp_buf[16];
  std::snprintf(exp_buf, sizeof exp_buf, "e%c%02d", exponent < 0 ? '-' : '+',
                exponent < 0 ? -exponent : exponent);
  return out + exp_buf;
}

}  // namespace qg
