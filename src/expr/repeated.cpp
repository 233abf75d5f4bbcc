#include "expr/repeated.hpp"

#include <algorithm>
#include <cctype>
#include <functional>
#include <regex>
#include <set>
#include <vector>

#include "expr/lexer.hpp"

namespace tether {

namespace {

using nlohmann::json;
using Index = std::vector<long long>;
using Bindings = std::vector<std::pair<std::string, long long>>;  // the ranges' indices, outermost first

constexpr long long kMaxSize = 100000;      // a size's largest value
constexpr long long kMaxValue = 1000000000;  // an index expression's largest magnitude
constexpr std::size_t kMaxItems = 100000;   // items and terms written out, in all
constexpr std::size_t kMaxText = 100000;    // characters of a text as written (as the lexer's)
constexpr std::size_t kMaxWritten = std::size_t(64) << 20;  // characters written out, in all
constexpr std::size_t kMaxRanges = 8;  // ranges of one "for" or sum, and indices of one name

using lexer::at;
using lexer::in_name;
using lexer::is_space;
using lexer::starts_name;

std::string joined(const Index& index, const char* separator) {
  std::string s;
  for (std::size_t k = 0; k < index.size(); ++k) s += (k ? separator : "") + std::to_string(index[k]);
  return s;
}
std::string plain_name(const std::string& name, const Index& index) { return name + "__" + joined(index, "_"); }
std::string written_name(const std::string& name, const Index& index) { return name + "[" + joined(index, ",") + "]"; }

std::string described(const Bindings& b) {
  std::string s;
  for (const auto& [name, value] : b) s += (s.empty() ? "" : ", ") + name + " = " + std::to_string(value);
  return s;
}

// Refuses a text whose parentheses and brackets nest deeper than the
// lexer's bound: the readers below descend once per level.
void check_nesting(const std::string& text, const std::string& path) {
  int depth = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    depth += (text[i] == '(' || text[i] == '[') ? 1 : (text[i] == ')' || text[i] == ']') ? -1 : 0;
    if (depth > lexer::max_nesting) lexer::too_deep(path, i);
  }
}

// The end of the bracket or parenthesis opened at `open`, or npos.
std::size_t closing(const std::string& text, std::size_t open, std::size_t end) {
  int depth = 0;
  for (std::size_t i = open; i < end; ++i) {
    depth += (text[i] == '(' || text[i] == '[') ? 1 : (text[i] == ')' || text[i] == ']') ? -1 : 0;
    if (depth == 0) return i;
  }
  return std::string::npos;
}

// [begin, end) split at its commas outside parentheses and brackets.
std::vector<std::pair<std::size_t, std::size_t>> arguments(const std::string& text, std::size_t begin, std::size_t end) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  int depth = 0;
  std::size_t start = begin;
  for (std::size_t i = begin; i < end; ++i) {
    depth += (text[i] == '(' || text[i] == '[') ? 1 : (text[i] == ')' || text[i] == ']') ? -1 : 0;
    if (text[i] == ',' && depth == 0) out.emplace_back(start, i), start = i + 1;
  }
  out.emplace_back(start, end);
  return out;
}

class Expander {
 public:
  explicit Expander(std::string root) : root_(std::move(root)) {}

  ExpandedDeclaration run(const json& j) {
    out_.declaration = j;
    if (!j.is_object()) return std::move(out_);  // parse_declared_system says what it must be
    json& d = out_.declaration;
    read_sizes(j);
    d.erase("sizes");
    if (j.contains("parameters") && j["parameters"].is_object())
      for (const auto& [name, value] : j["parameters"].items()) declare_plain(name, key("parameters") + "." + name);
    if (j.contains("dof") && j["dof"].is_number_integer())  // q0 .. q{dof-1}
      for (long long i = 0; i < std::min<long long>(j["dof"].get<long long>(), 256); ++i) plain_.insert("q" + std::to_string(i));
    if (j.contains("coordinates") && j["coordinates"].is_array())
      d["coordinates"] = items(j["coordinates"], key("coordinates"), key("coordinates"), {},
                               [&](const json& v, const std::string& path, const std::string&, const Bindings& b) {
                                 return declared(v, path, b);
                               });
    // Definitions: their names first, since a value may use any of them.
    std::vector<std::tuple<std::string, const json*, std::string, Bindings>> values;  // plain name, value, path, indices
    if (j.contains("definitions") && j["definitions"].is_object()) {
      for (const auto& item : j["definitions"].items()) {
        const std::string& name = item.key();  // not a structured binding: clang 14 cannot capture one
        const json& value = item.value();
        const std::string path = key("definitions") + "." + name;
        const bool repeated = value.is_object() && value.contains("for");
        if (repeated) {
          check_repeat(value, path);
          if (!value["each"].is_string() && !value["each"].is_number())
            throw ConfigError(path + ".each", "must be one expression (a string) or a number");
          if (name.find('[') == std::string::npos)
            throw ConfigError(path, "is given \"for\" a range: its name needs the index, such as " + name + "[i]");
          for_each(value["for"], path + ".for", {}, [&](const Bindings& b) {
            const std::string plain = declared(json(name), path, b).get<std::string>();
            values.emplace_back(plain, &value["each"], path + ".each", b);
            out_.origins[key("definitions") + "." + plain] = {path + ".each", described(b)};
          });
        } else {
          const std::string plain = declared(json(name), path, {}).get<std::string>();
          values.emplace_back(plain, &value, path, Bindings{});
          if (plain != name) out_.origins[key("definitions") + "." + plain] = {path, ""};
        }
      }
    }
    names_known_ = true;
    for (const auto& [name, value] : sizes_)
      if (plain_.count(name) || families_.count(name))
        throw ConfigError(key("sizes") + "." + name, "is also a declared name");
    for (const auto& [name, path] : pending_indices_) check_index_name(name, path);
    if (j.contains("definitions") && j["definitions"].is_object()) {
      json defs = json::object();
      for (const auto& [plain, value, path, b] : values) defs[plain] = expression(*value, path, b);
      d["definitions"] = defs;
    }
    const Leaf leaf = [&](const json& v, const std::string& path, const std::string&, const Bindings& b) {
      return expression(v, path, b);
    };
    for (const char* k : {"potential", "length_scale", "energy_scale"})
      if (j.contains(k)) d[k] = expression(j[k], key(k), {});
    for (const char* k : {"constraints", "mass"})
      if (j.contains(k) && j[k].is_array()) d[k] = items(j[k], key(k), key(k), {}, leaf);
    if (j.contains("frame") && j["frame"].is_array())
      d["frame"] = items(j["frame"], key("frame"), key("frame"), {},
                         [&](const json& row, const std::string& written, const std::string& plain, const Bindings& b) {
                           return row.is_array() ? items(row, written, plain, b, leaf) : row;
                         });
    return std::move(out_);
  }

 private:
  // An item as written at a path, its path in the plain declaration, the indices.
  using Leaf = std::function<json(const json&, const std::string&, const std::string&, const Bindings&)>;

  std::string key(const std::string& k) const { return root_ + "." + k; }

  void read_sizes(const json& j) {
    if (!j.contains("sizes")) return;
    const json& s = j["sizes"];
    if (!s.is_object()) throw ConfigError(key("sizes"), "must be an object of names and whole numbers, such as {\"N\": 12}");
    for (const auto& [name, value] : s.items()) {
      const std::string path = key("sizes") + "." + name;
      check_new_name(name, path);
      if (!value.is_number_integer() || value.get<long long>() < 0 || value.get<long long>() > kMaxSize)
        throw ConfigError(path, "must be a whole number from 0 to " + std::to_string(kMaxSize));
      sizes_[name] = value.get<long long>();
    }
  }

  // A name the declaration introduces: an identifier without "__" (which
  // the plain declaration uses for indices) and not a function's.
  void check_new_name(const std::string& name, const std::string& path) const {
    if (name.empty() || !starts_name(name[0]) || !std::all_of(name.begin(), name.end(), in_name) || name.size() > 64)
      throw ConfigError(path, "must be a name: letters, digits and _, not starting with a digit");
    refuse_index_marker(name, path);
    if (name == "sum" || lexer::is_function(name)) throw ConfigError(path, "is a function's name");
  }

  static void refuse_index_marker(const std::string& name, const std::string& path) {
    if (name.find("__") != std::string::npos)
      throw ConfigError(path, "holds \"__\", which tether keeps for indexed names (x[3] is x__3)");
  }

  void declare_plain(const std::string& name, const std::string& path) {
    refuse_index_marker(name, path);
    plain_.insert(name);
  }

  // An index's name, bound at `path`: not a size, not an enclosing range's,
  // not a declared name (checked once every name is known).
  void check_index_name(const std::string& name, const std::string& path) {
    if (sizes_.count(name)) throw ConfigError(path, "uses \"" + name + "\" as an index, which is a size's name");
    if (!names_known_) {
      pending_indices_.emplace_back(name, path);
      return;
    }
    if (plain_.count(name) || families_.count(name))
      throw ConfigError(path, "uses \"" + name + "\" as an index, which is also a declared name");
  }

  // The integer value of index arithmetic in text[begin, end): numbers, the
  // indices bound in `b`, the sizes, + - * and parentheses.
  long long integer(const std::string& text, std::size_t begin, std::size_t end, const Bindings& b,
                    const std::string& path) const {
    std::size_t i = begin;
    const auto fail = [&](const std::string& why, std::size_t where) -> long long { throw ConfigError(path, why + at(where)); };
    const auto skip = [&] {
      while (i < end && is_space(text[i])) ++i;
    };
    const auto bounded = [&](long double v, std::size_t where) {
      if (v > kMaxValue || v < -kMaxValue) fail("has an index beyond " + std::to_string(kMaxValue), where);
      return static_cast<long long>(v);
    };
    std::function<long long()> sum;
    const std::function<long long()> factor = [&]() -> long long {
      skip();
      if (i >= end) return fail("has an index expression that ends early", i);
      const std::size_t start = i;
      if (text[i] == '-') {  // signs in a row, read as a loop: a long run is no deeper than one
        bool negative = false;
        for (; i < end && (text[i] == '-' || is_space(text[i])); ++i) negative ^= text[i] == '-';
        const long long v = factor();
        return negative ? -v : v;
      }
      if (text[i] == '(') {
        ++i;
        const long long v = sum();
        skip();
        if (i >= end || text[i] != ')') return fail("has a \"(\" in an index that is not closed", start);
        return ++i, v;
      }
      if (lexer::is_digit(text[i])) {
        while (i < end && lexer::is_digit(text[i])) ++i;
        if (i - start > 10) return fail("has an index beyond " + std::to_string(kMaxValue), start);
        return bounded(std::stold(text.substr(start, i - start)), start);
      }
      if (starts_name(text[i])) {
        while (i < end && in_name(text[i])) ++i;
        const std::string name = text.substr(start, i - start);
        for (auto it = b.rbegin(); it != b.rend(); ++it)
          if (it->first == name) return it->second;
        if (sizes_.count(name)) return sizes_.at(name);
        return fail("has \"" + name.substr(0, 40) + "\" in an index, which is neither a range's index nor a size", start);
      }
      return fail("has an unexpected character " + lexer::quoted(text[i]) +
                      " in an index (an index is whole numbers, indices, sizes, + - * and parentheses)", i);
    };
    const auto product = [&] {
      long long v = factor();
      for (skip(); i < end && text[i] == '*'; skip()) {
        const std::size_t where = i++;
        v = bounded(static_cast<long double>(v) * factor(), where);
      }
      return v;
    };
    sum = [&] {
      long long v = product();
      for (skip(); i < end && (text[i] == '+' || text[i] == '-'); skip()) {
        const std::size_t where = i;
        const char op = text[i++];
        const long long r = product();
        v = bounded(static_cast<long double>(v) + (op == '+' ? r : -r), where);
      }
      return v;
    };
    const long long v = sum();
    skip();
    if (i < end) fail("has an unexpected " + lexer::quoted(text[i]) +
                          " in an index", i);
    return v;
  }

  struct Range {
    std::string name;
    std::size_t first_begin, first_end, last_begin, last_end;  // of the text
  };

  // "i = first..last" in text[begin, end).
  Range range(const std::string& text, std::size_t begin, std::size_t end, const Bindings& bound, const std::string& path) {
    const std::string form = " (a range is written i = first..last)";
    std::size_t i = begin;
    while (i < end && is_space(text[i])) ++i;
    const std::size_t start = i;
    while (i < end && in_name(text[i])) ++i;
    Range r;
    r.name = text.substr(start, i - start);
    if (r.name.empty() || !starts_name(r.name[0])) throw ConfigError(path, "expects an index's name" + at(start) + form);
    check_new_name(r.name, path);
    for (const auto& [name, value] : bound)
      if (name == r.name) throw ConfigError(path, "binds \"" + name + "\"" + at(start) + " inside a range of the same index");
    check_index_name(r.name, path);
    while (i < end && is_space(text[i])) ++i;
    if (i >= end || text[i] != '=') throw ConfigError(path, "expects \"=\"" + at(i) + form);
    const std::size_t dots = text.find("..", i);
    if (dots == std::string::npos || dots >= end) throw ConfigError(path, "expects \"..\" between the first and the last value" + form);
    r.first_begin = i + 1, r.first_end = dots, r.last_begin = dots + 2, r.last_end = end;
    return r;
  }

  // Calls f with each binding of `ranges` (the later ones within the earlier
  // ones, their bounds computed with the indices outside them) after `b`.
  void bindings(const std::string& text, const std::vector<Range>& ranges, std::size_t k, Bindings& b,
                const std::string& path, const std::function<void(const Bindings&)>& f) {
    if (k == ranges.size()) return f(b);
    const Range& r = ranges[k];
    const long long first = integer(text, r.first_begin, r.first_end, b, path);
    const long long last = integer(text, r.last_begin, r.last_end, b, path);
    for (long long v = first; v <= last; ++v) {
      if (++written_ > kMaxItems)
        throw ConfigError(path, "writes out more than " + std::to_string(kMaxItems) + " items and terms");
      b.emplace_back(r.name, v);
      bindings(text, ranges, k + 1, b, path, f);
      b.pop_back();
    }
  }

  // `spec` ("i = 1..N, j = i+1..N") at `path`: f for each binding, after `outer`.
  void for_each(const json& spec, const std::string& path, const Bindings& outer,
                const std::function<void(const Bindings&)>& f) {
    if (!spec.is_string() || spec.get<std::string>().size() > kMaxText)
      throw ConfigError(path, "must be one or more ranges, such as \"i = 1..N\" or \"i = 1..N, j = i+1..N\"");
    const std::string text = spec.get<std::string>();
    check_nesting(text, path);
    std::vector<Range> ranges;
    Bindings names = outer;
    const auto parts = arguments(text, 0, text.size());
    if (parts.size() > kMaxRanges) throw ConfigError(path, "has more than " + std::to_string(kMaxRanges) + " ranges");
    for (const auto& [begin, end] : parts) {
      ranges.push_back(range(text, begin, end, names, path));
      names.emplace_back(ranges.back().name, 0);
    }
    Bindings b = outer;
    bindings(text, ranges, 0, b, path, f);
  }

  void check_repeat(const json& item, const std::string& path) const {
    for (const auto& [k, v] : item.items())
      if (k != "for" && k != "each") throw ConfigError(path + "." + k, "unknown key (a repeated item has \"for\" and \"each\")");
    if (!item.contains("each")) throw ConfigError(path + ".each", "is missing: the item, or list of items, to repeat");
  }

  // The array `a` (as written at `written`, in the plain declaration at
  // `plain`) with its repeated items written out, each through `leaf`.
  json items(const json& a, const std::string& written, const std::string& plain, const Bindings& outer, const Leaf& leaf) {
    json out = json::array();
    const auto add = [&](const json& v, const std::string& from, const Bindings& b) {
      const std::string to = plain + "[" + std::to_string(out.size()) + "]";
      if (from != to || !b.empty()) out_.origins[to] = {from, described(b)};
      out.push_back(leaf(v, from, to, b));
    };
    for (std::size_t k = 0; k < a.size(); ++k) {
      const std::string path = written + "[" + std::to_string(k) + "]";
      if (!a[k].is_object() || !a[k].contains("for")) {
        add(a[k], path, outer);
        continue;
      }
      check_repeat(a[k], path);
      const json& each = a[k]["each"];
      for_each(a[k]["for"], path + ".for", outer, [&](const Bindings& b) {
        if (!each.is_array()) return add(each, path + ".each", b);
        for (std::size_t m = 0; m < each.size(); ++m) add(each[m], path + ".each[" + std::to_string(m) + "]", b);
      });
    }
    return out;
  }

  // A declared name as written ("x" or "x[i+1]"), registered, as the plain declaration names it.
  json declared(const json& v, const std::string& path, const Bindings& b) {
    if (!v.is_string()) return v;  // parse_declared_system says what it must be
    const std::string text = v.get<std::string>();
    if (text.size() > kMaxText) throw ConfigError(path, "is longer than " + std::to_string(kMaxText) + " characters");
    check_nesting(text, path);
    const std::size_t open = text.find('[');
    const std::string name = text.substr(0, open);
    check_new_name(name, path);
    if (open == std::string::npos) {
      if (families_.count(name)) throw ConfigError(path, "declares \"" + name + "\" both with and without an index");
      plain_.insert(name);
      return v;
    }
    if (text.back() != ']' || closing(text, open, text.size()) != text.size() - 1)
      throw ConfigError(path, "must be a name, or a name and its indices in brackets, such as x[i] or r[i,j]");
    Index index;
    const auto parts = arguments(text, open + 1, text.size() - 1);
    if (parts.size() > kMaxRanges) throw ConfigError(path, "gives a name more than " + std::to_string(kMaxRanges) + " indices");
    for (const auto& [begin, end] : parts) index.push_back(integer(text, begin, end, b, path));
    if (plain_.count(name)) throw ConfigError(path, "declares \"" + name + "\" both with and without an index");
    auto& family = families_[name];
    if (!family.empty() && family.begin()->size() != index.size())
      throw ConfigError(path, "gives \"" + name + "\" " + std::to_string(index.size()) + " indices, elsewhere " +
                                  std::to_string(family.begin()->size()));
    if (!family.insert(index).second)
      throw ConfigError(path, "declares " + written_name(name, index) + " twice" + (b.empty() ? "" : " (" + described(b) + ")"));
    for (long long x : index)
      if (x < 0) throw ConfigError(path, "declares " + written_name(name, index) + ": indices are whole numbers from 0");
    return plain_name(name, index);
  }

  // An expression as written, under the indices `b`, in the plain grammar. A
  // text that uses no index, size or sum is left to the lexer as it is.
  json expression(const json& v, const std::string& path, const Bindings& b) {
    if (!v.is_string()) return v;  // numbers; parse_declared_system refuses the rest
    const std::string& text = v.get_ref<const std::string&>();
    if (text.size() > kMaxText) throw ConfigError(path, "is longer than " + std::to_string(kMaxText) + " characters");
    if (!repeats(text, b)) return v;
    check_nesting(text, path);
    return rewritten(text, 0, text.size(), b, path);
  }

  // Whether `text` has a bracket, a sum, a size, an indexed name or one of the indices `b`.
  bool repeats(const std::string& text, const Bindings& b) const {
    for (std::size_t i = 0; i < text.size();) {
      if (text[i] == '[') return true;
      if (!starts_name(text[i]) || (i > 0 && (in_name(text[i - 1]) || text[i - 1] == '.'))) {
        ++i;
        continue;
      }
      const std::size_t start = i;
      while (i < text.size() && in_name(text[i])) ++i;
      const std::string name = text.substr(start, i - start);
      if (name == "sum" || sizes_.count(name) || families_.count(name) ||
          std::any_of(b.begin(), b.end(), [&](const auto& index) { return index.first == name; }))
        return true;
    }
    return false;
  }

  // text[begin, end), read token by token with the lexer's rules
  // (declared_system.cpp), its indexed names, sizes, indices and sums written out.
  std::string rewritten(const std::string& text, std::size_t begin, std::size_t end, const Bindings& b,
                        const std::string& path) {
    std::string out;
    int depth = 0;
    for (std::size_t i = begin; i < end;) {
      const char c = text[i];
      if (is_space(c)) {
        out += c, ++i;
      } else if (lexer::starts_number(text, i, end)) {
        const std::size_t start = i;
        i = lexer::number_end(text, i, end);
        out += text.substr(start, i - start);
      } else if (starts_name(c)) {
        const std::size_t start = i;
        while (i < end && in_name(text[i])) ++i;
        const std::string name = text.substr(start, i - start);
        std::size_t next = i;
        while (next < end && is_space(text[next])) ++next;
        if (next < end && text[next] == '[') {
          const std::size_t close = closing(text, next, end);
          if (close == std::string::npos) throw ConfigError(path, "has a \"[\" that is not closed" + at(next));
          out += indexed(name, text, start, next, close, b, path);
          i = close + 1;
        } else if (next < end && text[next] == '(' && name == "sum") {
          const std::size_t close = closing(text, next, end);
          if (close == std::string::npos) throw ConfigError(path, "a \"(\" is not closed");
          out += summed(text, start, next, close, b, path);
          i = close + 1;
        } else if (next < end && text[next] == '(') {
          if (!lexer::is_function(name)) lexer::unknown_function(path, name, start);
          out += name;
        } else {
          out += bare(name, start, b, path);
        }
      } else if (std::string("+-*/^(),").find(c) != std::string::npos) {
        depth += c == '(' ? 1 : c == ')' ? -1 : 0;
        if (depth < 0) throw ConfigError(path, "a \")\" without its \"(\"" + at(i));
        out += c, ++i;
      } else {
        lexer::unexpected_character(path, c, i);
      }
    }
    if (depth > 0) throw ConfigError(path, "a \"(\" is not closed");
    if ((characters_ += out.size()) > kMaxWritten)
      throw ConfigError(path, "writes out more than " + std::to_string(kMaxWritten >> 20) + " MiB of expressions");
    return out;
  }

  // A name without index or call: an index's or a size's value, or a declared name.
  std::string bare(const std::string& name, std::size_t start, const Bindings& b, const std::string& path) const {
    for (auto it = b.rbegin(); it != b.rend(); ++it)
      if (it->first == name) return it->second < 0 ? "(" + std::to_string(it->second) + ")" : std::to_string(it->second);
    if (sizes_.count(name)) return std::to_string(sizes_.at(name));
    if (families_.count(name))
      throw ConfigError(path, "uses \"" + name.substr(0, 40) + "\"" + at(start) + " without its index, such as " + name + "[i]");
    if (!plain_.count(name))
      throw ConfigError(path, "unknown symbol \"" + name.substr(0, 40) + "\"" + at(start) +
                                  ": not a coordinate, parameter, definition, size or index");
    return name;
  }

  // name[...] with its brackets at text[open] and text[close].
  std::string indexed(const std::string& name, const std::string& text, std::size_t start, std::size_t open,
                      std::size_t close, const Bindings& b, const std::string& path) const {
    const auto family = families_.find(name);
    if (family == families_.end())
      throw ConfigError(path, "indexes \"" + name.substr(0, 40) + "\"" + at(start) +
                                  ", which is not declared with an index (such as \"" + name.substr(0, 40) + "[i]\")");
    Index index;
    const auto parts = arguments(text, open + 1, close);
    if (parts.size() > kMaxRanges)
      throw ConfigError(path, "gives " + name.substr(0, 40) + at(start) + " more than " + std::to_string(kMaxRanges) + " indices");
    for (const auto& [first, last] : parts) index.push_back(integer(text, first, last, b, path));
    if (!family->second.count(index)) {
      const Index& low = *family->second.begin();
      const Index& high = *family->second.rbegin();
      throw ConfigError(path, "names " + written_name(name, index) + at(start) + (b.empty() ? "" : " (" + described(b) + ")") +
                                  ", which is not declared (" + name + " runs from " + written_name(name, low) +
                                  " to " + written_name(name, high) + ")");
    }
    return plain_name(name, index);
  }

  // sum(ranges..., body) with its parentheses at text[open] and text[close].
  std::string summed(const std::string& text, std::size_t start, std::size_t open, std::size_t close, const Bindings& outer,
                     const std::string& path) {
    const auto args = arguments(text, open + 1, close);
    const auto is_range = [&](const std::pair<std::size_t, std::size_t>& a) {
      return text.substr(a.first, a.second - a.first).find('=') != std::string::npos;
    };
    if (args.size() < 2 || is_range(args.back()) || !std::all_of(args.begin(), args.end() - 1, is_range))
      throw ConfigError(path, "has a sum" + at(start) + " that is not sum(i = first..last, expression), or with more "
                              "ranges, sum(i = 1..N, j = i+1..N, expression)");
    if (args.size() > kMaxRanges + 1)
      throw ConfigError(path, "has a sum" + at(start) + " of more than " + std::to_string(kMaxRanges) + " ranges");
    std::vector<Range> ranges;
    Bindings names = outer;
    for (std::size_t k = 0; k + 1 < args.size(); ++k) {
      ranges.push_back(range(text, args[k].first, args[k].second, names, path));
      names.emplace_back(ranges.back().name, 0);
    }
    std::string terms;
    Bindings b = outer;
    std::size_t first = args.back().first, last = args.back().second;  // captured below: not a structured binding (clang 14)
    while (first < last && is_space(text[first])) ++first;
    while (last > first && is_space(text[last - 1])) --last;
    bindings(text, ranges, 0, b, path, [&](const Bindings& inner) {
      terms += (terms.empty() ? "(" : ") + (") + rewritten(text, first, last, inner, path);
    });
    return terms.empty() ? "0" : "(" + terms + "))";
  }

  std::string root_;
  ExpandedDeclaration out_;
  std::map<std::string, long long> sizes_;
  std::set<std::string> plain_;                      // names declared without an index
  std::map<std::string, std::set<Index>> families_;  // names declared with indices, and those indices
  std::vector<std::pair<std::string, std::string>> pending_indices_;
  bool names_known_ = false;
  std::size_t written_ = 0, characters_ = 0;  // items and terms, characters written out
};

}  // namespace

ExpandedDeclaration expand_repeated(const nlohmann::json& j, const std::string& path) { return Expander(path).run(j); }

ConfigError ExpandedDeclaration::as_written(const ConfigError& e) const {
  const std::string& path = e.path();
  std::string message = e.what();
  const std::string prefix = "config error at " + path + ": ";
  if (message.rfind(prefix, 0) == 0) message = message.substr(prefix.size());
  // The longest path of an item written out that `path` is in.
  const std::pair<const std::string, std::pair<std::string, std::string>>* origin = nullptr;
  for (const auto& o : origins)
    if (path.rfind(o.first, 0) == 0 && (path.size() == o.first.size() || path[o.first.size()] == '.' || path[o.first.size()] == '[') &&
        (!origin || o.first.size() > origin->first.size()))
      origin = &o;
  static const std::regex plain(R"(\b([A-Za-z_][A-Za-z0-9_]*?)__([0-9]+(_[0-9]+)*)\b)");
  const auto readable = [](const std::string& s) {
    std::string out;
    auto last = s.cbegin();
    for (std::sregex_iterator it(s.begin(), s.end(), plain), stop; it != stop; ++it) {
      out.append(last, (*it)[0].first);
      std::string index = (*it)[2].str();
      std::replace(index.begin(), index.end(), '_', ',');
      out += (*it)[1].str() + "[" + index + "]";
      last = (*it)[0].second;
    }
    return out.append(last, s.cend());
  };
  if (!origin) return ConfigError(path, readable(message));
  const auto& [written, indices] = origin->second;
  return ConfigError(written + path.substr(origin->first.size()),
                     readable(message) + (indices.empty() ? "" : " (where " + indices + ")"));
}

}  // namespace tether
