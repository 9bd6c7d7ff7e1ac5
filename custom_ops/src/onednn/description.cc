#include "onednn/description.h"

#include <cerrno>
#include <cstdlib>
#include <set>
#include <utility>

namespace qg::onednn {
namespace {

std::vector<std::string> Split(const std::string& text, char sep, bool skip_empty) {
  std::vector<std::string> parts;
  std::string part;
  for (char c : text) {
    if (c == sep) {
      if (!skip_empty || !part.empty()) parts.push_back(part);
      part.clear();
    } else {
      part += c;
    }
  }
  if (!skip_empty || !part.empty()) parts.push_back(part);
  return parts;
}

bool ParseId(const std::string& s, size_t* out) {
  if (s.empty() || s[0] < '0' || s[0] > '9') return false;
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = static_cast<size_t>(v);
  return true;
}

bool ParseInt(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = static_cast<int64_t>(v);
  return true;
}

bool ParseFloat(const std::string& s, float* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  *out = std::strtof(s.c_str(), &end);  // float.hex() text is exact; ERANGE keeps inf/denormals
  return *end == '\0';
}

// "in=1,2" -> {1, 2}; `what` names the list in messages.
std::vector<size_t> ParseIds(const std::string& list, const std::string& where, const char* what) {
  std::vector<size_t> ids;
  if (list.empty()) return ids;
  for (const auto& item : Split(list, ',', false)) {
    size_t id = 0;
    if (!ParseId(item, &id)) {
      throw DescriptionError(where + ": " + what + " '" + list +
                             "' is not a comma-separated list of tensor ids");
    }
    ids.push_back(id);
  }
  return ids;
}

void ParseDims(const std::string& token, TensorSpec* t, const std::string& where) {
  if (token == "-") return;  // unknown rank
  t->rank_known = true;
  if (token == "scalar") return;  // rank 0
  for (const auto& item : Split(token, ',', false)) {
    int64_t d = -1;
    if (item != "?" && (!ParseInt(item, &d) || d < 0)) {
      throw DescriptionError(where + ": dims '" + token +
                             "' must be comma-separated non-negative ints or '?', '-' for an "
                             "unknown rank, 'scalar' for rank 0");
    }
    t->dims.push_back(d);
  }
}

TensorSpec ParseTensor(const std::vector<std::string>& tok, size_t line) {
  const std::string at = "line " + std::to_string(line);
  if (tok.size() != 5) {
    throw DescriptionError(at + ": a tensor line is 'tensor <id> <dtype> <var|const> <dims>'");
  }
  TensorSpec t;
  if (!ParseId(tok[1], &t.id))
    throw DescriptionError(at + ": tensor id '" + tok[1] + "' is not a non-negative integer");
  const std::string where = "tensor " + tok[1];
  t.type = FindDataType(tok[2]);
  if (t.type == nullptr) {
    throw DescriptionError(where + ": unknown dtype '" + tok[2] + "' (one of " + DataTypeNames() +
                           ")");
  }
  if (tok[3] != "var" && tok[3] != "const") {
    throw DescriptionError(where + ": property '" + tok[3] + "' must be var or const");
  }
  t.constant = tok[3] == "const";
  ParseDims(tok[4], &t, where);
  return t;
}

AttrValue ParseAttr(const std::string& token, const std::string& where) {
  const size_t eq = token.find('=');
  const size_t colon = token.find(':', eq == std::string::npos ? 0 : eq);
  if (eq == std::string::npos || colon != eq + 2) {
    throw DescriptionError(where + ": '" + token + "' is not <attr>=<i|f|s|b>:<values>");
  }
  const std::string name = token.substr(0, eq);
  const char tag = token[eq + 1];
  const std::string values = token.substr(colon + 1);
  AttrValue a;
  a.name = FindAttr(name);
  if (a.name == nullptr) throw DescriptionError(where + ": unknown attribute '" + name + "'");
  const std::string attr = where + ": attribute " + name;
  if (tag != static_cast<char>(a.name->type)) {
    throw DescriptionError(attr + ": type '" + std::string(1, tag) + "', oneDNN's is '" +
                           std::string(1, static_cast<char>(a.name->type)) + "'");
  }
  if (values.empty()) throw DescriptionError(attr + ": no value");
  switch (a.name->type) {
    case AttrType::kString:
      a.text = values;
      break;
    case AttrType::kBool:
      if (values != "0" && values != "1")
        throw DescriptionError(attr + ": '" + values + "' is not 0 or 1");
      a.ints.push_back(values == "1" ? 1 : 0);
      break;
    case AttrType::kInts:
      for (const auto& v : Split(values, ',', false)) {
        int64_t x = 0;
        if (!ParseInt(v, &x)) throw DescriptionError(attr + ": '" + v + "' is not an int64");
        a.ints.push_back(x);
      }
      break;
    case AttrType::kFloats:
      for (const auto& v : Split(values, ',', false)) {
        float x = 0;
        if (!ParseFloat(v, &x)) throw DescriptionError(attr + ": '" + v + "' is not a float");
        a.floats.push_back(x);
      }
      break;
  }
  return a;
}

OpSpec ParseOp(const std::vector<std::string>& tok, size_t line) {
  const std::string at = "line " + std::to_string(line);
  if (tok.size() < 5) {
    throw DescriptionError(at + ": an op line is 'op <id> <Kind> in=<ids> out=<ids> [attrs]'");
  }
  OpSpec op;
  if (!ParseId(tok[1], &op.id))
    throw DescriptionError(at + ": op id '" + tok[1] + "' is not a non-negative integer");
  op.kind = FindOpKind(tok[2]);
  if (op.kind == nullptr)
    throw DescriptionError("op " + tok[1] + ": unknown kind '" + tok[2] + "'");
  const std::string where = op.Label();
  if (tok[3].rfind("in=", 0) != 0 || tok[4].rfind("out=", 0) != 0) {
    throw DescriptionError(where + ": in=<ids> and out=<ids> must follow the kind");
  }
  op.inputs = ParseIds(tok[3].substr(3), where, "in=");
  op.outputs = ParseIds(tok[4].substr(4), where, "out=");
  std::set<std::string> seen;
  for (size_t i = 5; i < tok.size(); ++i) {
    AttrValue a = ParseAttr(tok[i], where);
    if (!seen.insert(a.name->name).second) {
      throw DescriptionError(where + ": attribute " + a.name->name + " given twice");
    }
    op.attrs.push_back(std::move(a));
  }
  return op;
}

// Cross-line rules, once every line is read.
void CheckReferences(const Description& d) {
  std::map<size_t, size_t> producer;
  std::set<size_t> op_ids;
  for (const auto& op : d.ops) {
    if (!op_ids.insert(op.id).second) throw DescriptionError(op.Label() + ": op id used twice");
    for (size_t id : op.inputs) {
      if (!d.tensor_index.count(id))
        throw DescriptionError(op.Label() + ": input tensor " + std::to_string(id) +
                               " is not declared");
    }
    for (size_t id : op.outputs) {
      if (!d.tensor_index.count(id))
        throw DescriptionError(op.Label() + ": output tensor " + std::to_string(id) +
                               " is not declared");
      if (d.Tensor(id).constant)
        throw DescriptionError(op.Label() + ": output tensor " + std::to_string(id) +
                               " is declared const");
      const auto [it, fresh] = producer.emplace(id, op.id);
      if (!fresh) {
        throw DescriptionError(op.Label() + ": tensor " + std::to_string(id) +
                               " is already the output of op " + std::to_string(it->second));
      }
    }
  }
  for (const auto* list : {&d.inputs, &d.outputs}) {
    const char* what = list == &d.inputs ? "inputs" : "outputs";
    std::set<size_t> seen;
    for (size_t id : *list) {
      if (!d.tensor_index.count(id))
        throw DescriptionError(std::string(what) + ": tensor " + std::to_string(id) +
                               " is not declared");
      if (!seen.insert(id).second)
        throw DescriptionError(std::string(what) + ": tensor " + std::to_string(id) +
                               " is listed twice");
    }
  }
  for (size_t id : d.inputs) {
    if (producer.count(id))
      throw DescriptionError("inputs: tensor " + std::to_string(id) + " is the output of op " +
                             std::to_string(producer[id]));
  }
  for (size_t id : d.outputs) {
    if (!producer.count(id))
      throw DescriptionError("outputs: tensor " + std::to_string(id) + " is no op's output");
  }
}

}  // namespace

std::string OpSpec::Label() const {
  return "op " + std::to_string(id) + " " + (kind != nullptr ? kind->name : "?");
}

const TensorSpec& Description::Tensor(size_t id) const {
  const auto it = tensor_index.find(id);
  if (it == tensor_index.end())
    throw DescriptionError("tensor " + std::to_string(id) + " is not declared");
  return tensors[it->second];
}

Description ParseDescription(const std::string& text) {
  Description d;
  const auto lines = Split(text, '\n', false);
  bool header = false;
  for (size_t n = 0; n < lines.size(); ++n) {
    std::string line = lines[n];
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const auto tok = Split(line, ' ', true);
    if (tok.empty()) continue;
    const std::string at = "line " + std::to_string(n + 1);
    if (!header) {
      if (tok.size() != 2 || tok[0] != "qgpart" || tok[1] != "1") {
        throw DescriptionError(at + ": a description starts with 'qgpart 1'");
      }
      header = true;
    } else if (tok[0] == "tensor") {
      TensorSpec t = ParseTensor(tok, n + 1);
      if (!d.tensor_index.emplace(t.id, d.tensors.size()).second) {
        throw DescriptionError("tensor " + tok[1] + ": tensor id declared twice");
      }
      d.tensors.push_back(std::move(t));
    } else if (tok[0] == "op") {
      d.ops.push_back(ParseOp(tok, n + 1));
    } else if (tok[0] == "inputs" || tok[0] == "outputs") {
      const bool in = tok[0] == "inputs";
      if (in ? d.has_inputs : d.has_outputs)
        throw DescriptionError(at + ": a second '" + tok[0] + "' line");
      (in ? d.has_inputs : d.has_outputs) = true;
      auto& list = in ? d.inputs : d.outputs;
      for (size_t i = 1; i < tok.size(); ++i) {
        size_t id = 0;
        if (!ParseId(tok[i], &id))
          throw DescriptionError(at + ": '" + tok[i] + "' is not a tensor id");
        list.push_back(id);
      }
    } else {
      throw DescriptionError(at + ": unknown item '" + tok[0] + "' (tensor, op, inputs, outputs)");
    }
  }
  if (!header) throw DescriptionError("empty description (it starts with 'qgpart 1')");
  if (d.ops.empty()) throw DescriptionError("the description has no op");
  CheckReferences(d);
  return d;
}

}  // namespace qg::onednn
