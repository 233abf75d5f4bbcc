#include "config/json_node.hpp"

namespace tether {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

std::string show(const nlohmann::json& j) {
  std::string s = j.dump();
  if (s.size() <= 60) return s;
  std::size_t cut = 57;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 character
  return s.substr(0, cut) + "...";
}

std::string show_key(const std::string& key) {
  const std::string quoted = show(nlohmann::json(key));
  return quoted.substr(1, quoted.size() - (quoted.back() == '"' ? 2 : 1));
}

// How deep a config may nest. tether's own configs nest 5 levels; the bound
// keeps a hostile file (10^5 brackets) from overflowing the stack in the
// recursive copies and printing of nlohmann::json.
constexpr int max_config_depth = 64;

// Checks what nlohmann::json::parse lets through: nesting beyond
// max_config_depth, and a key given twice in one object (JSON leaves which
// one counts undefined; nlohmann keeps the last). Syntax errors are left to
// the parser's own message.
class ConfigShape final : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit ConfigShape(std::string source) : source_(std::move(source)) {}

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override { return open(true); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    Level& l = levels_.back();
    l.key = k;
    if (!l.keys.insert(k).second) throw ConfigError(path(), "appears twice in the same object: give each key once");
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  struct Level {
    bool object;
    std::string key;           // the current key (objects)
    std::int64_t index = -1;   // the current element (arrays)
    std::set<std::string> keys;
  };
  bool value() {
    if (!levels_.empty() && !levels_.back().object) ++levels_.back().index;
    return true;
  }
  bool open(bool object) {
    value();  // the new object or array is an element of its parent
    if (int(levels_.size()) >= max_config_depth)
      throw ConfigError(levels_.size() > 1 ? path() : source_,
                        "nests deeper than " + std::to_string(max_config_depth) + " levels");
    levels_.push_back(Level{object, {}, -1, {}});
    return true;
  }
  bool close() {
    levels_.pop_back();
    return true;
  }
  // The path of the current key or element, shortened past a few levels.
  std::string path() const {
    std::string p;
    for (std::size_t d = 0; d < levels_.size() && d < 8; ++d) {
      const Level& l = levels_[d];
      if (l.object) {
        if (!p.empty()) p += '.';
        p += show_key(l.key);
      } else {
        p += '[';
        p += std::to_string(l.index);
        p += ']';
      }
    }
    if (levels_.size() > 8) p += "...";
    return p.empty() ? source_ : p;
  }

  std::string source_;
  std::vector<Level> levels_;
};

nlohmann::json parse_config_json(const std::string& text, const std::string& source) {
  try {
    ConfigShape shape(source);
    if (nlohmann::json::sax_parse(text, &shape)) return nlohmann::json::parse(text);
    return nlohmann::json::parse(text);  // a syntax error: the parser says where
  } catch (const nlohmann::json::exception& e) {  // parse errors, and number overflow (out_of_range)
    throw ConfigError(source, std::string("is not valid JSON: ") + e.what());
  }
}

Node::Node(const nlohmann::json& j, std::string path) : j_(j), path_(std::move(path)) {
  if (!j_.is_object()) throw ConfigError(path_.empty() ? "(top level)" : path_, "must be an object, got " + show(j_));
}

Node Node::object(const std::string& key) const {
  if (!has(key)) throw ConfigError(at(key), "is missing");
  return Node(j_.at(key), at(key));
}

Node Node::object_or_empty(const std::string& key) const {
  static const nlohmann::json empty = nlohmann::json::object();
  return has(key) ? Node(j_.at(key), at(key)) : Node(empty, at(key));
}

std::string Node::string(const std::string& key, const std::vector<std::string>& allowed,
                         const std::string* fallback) const {
  if (!has(key)) {
    if (fallback) return *fallback;
    throw ConfigError(at(key), "is missing (one of: " + join(allowed) + ")");
  }
  const nlohmann::json& v = j_.at(key);
  if (!v.is_string()) throw ConfigError(at(key), "must be a string, got " + show(v));
  const std::string s = v.get<std::string>();
  if (std::find(allowed.begin(), allowed.end(), s) == allowed.end())
    throw ConfigError(at(key), "unknown value " + show(v) + " (one of: " + join(allowed) + ")");
  return s;
}

std::string Node::text(const std::string& key) const {
  if (!has(key)) throw ConfigError(at(key), "is missing");
  const nlohmann::json& v = j_.at(key);
  if (!v.is_string() || v.get_ref<const std::string&>().empty())
    throw ConfigError(at(key), "must be a non-empty string, got " + show(v));
  return v.get<std::string>();
}

Real Node::number(const std::string& key, std::optional<Real> fallback) const {
  if (!has(key)) {
    if (fallback) return *fallback;
    throw ConfigError(at(key), "is missing");
  }
  return as_number(j_.at(key), at(key));
}

Real Node::positive(const std::string& key, std::optional<Real> fallback) const {
  const Real x = number(key, fallback);
  if (!(x > 0)) throw ConfigError(at(key), "must be positive, got " + show(j_.contains(key) ? j_.at(key) : nlohmann::json(x)));
  return x;
}

Real Node::non_negative(const std::string& key, std::optional<Real> fallback) const {
  const Real x = number(key, fallback);
  if (!(x >= 0)) throw ConfigError(at(key), "must be >= 0, got " + show(j_.at(key)));
  return x;
}

std::int64_t Node::integer(const std::string& key, std::int64_t lo, std::int64_t hi,
                           std::optional<std::int64_t> fallback) const {
  if (!has(key)) {
    if (fallback) return *fallback;
    throw ConfigError(at(key), "is missing");
  }
  const nlohmann::json& v = j_.at(key);
  const bool integral_float = v.is_number_float() && v.get<double>() == std::floor(v.get<double>());
  if (!v.is_number_integer() && !integral_float) throw ConfigError(at(key), "must be an integer, got " + show(v));
  if (integral_float && !(std::fabs(v.get<double>()) < 9e15))
    throw ConfigError(at(key), "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + show(v));
  const std::int64_t x = v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(INT64_MAX)
                             ? INT64_MAX
                             : (v.is_number_integer() ? v.get<std::int64_t>() : std::int64_t(v.get<double>()));
  if (x < lo || x > hi)
    throw ConfigError(at(key), "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + show(v));
  return x;
}

bool Node::boolean(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  if (!j_.at(key).is_boolean()) throw ConfigError(at(key), "must be true or false, got " + show(j_.at(key)));
  return j_.at(key).get<bool>();
}

std::vector<Real> Node::numbers(const std::string& key) const {
  if (!has(key)) throw ConfigError(at(key), "is missing");
  const nlohmann::json& v = j_.at(key);
  if (!v.is_array()) throw ConfigError(at(key), "must be an array of numbers, got " + show(v));
  std::vector<Real> out;
  for (std::size_t i = 0; i < v.size(); ++i) out.push_back(as_number(v[i], at(key) + "[" + std::to_string(i) + "]"));
  return out;
}

void Node::only(const std::set<std::string>& known) const {
  for (auto it = j_.begin(); it != j_.end(); ++it) {
    if (known.count(it.key())) continue;
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    throw ConfigError(at(show_key(it.key())),
                      list.empty() ? "unknown key (nothing is expected here)"
                                   : "unknown key (expected one of: " + list + ")");
  }
}

Real Node::as_number(const nlohmann::json& v, const std::string& path) {
  if (!v.is_number()) throw ConfigError(path, "must be a number, got " + show(v));
  const Real x = v.get<Real>();
  if (!std::isfinite(x)) throw ConfigError(path, "must be finite, got " + show(v));
  return x;
}

}  // namespace tether
