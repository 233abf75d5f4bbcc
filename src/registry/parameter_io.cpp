#include "registry/parameter_io.hpp"

namespace tether {

std::string bound_number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

std::string range_text(const Range& r) {
  const bool lo = std::isfinite(r.lo), hi = std::isfinite(r.hi);
  std::string s;
  if (lo && !hi && r.lo == 0) s = r.lo_open ? "must be positive" : "must be >= 0";
  else if (lo && !hi) s = std::string("must be ") + (r.lo_open ? "> " : ">= ") + bound_number(r.lo);
  else if (!lo && hi) s = std::string("must be ") + (r.hi_open ? "< " : "<= ") + bound_number(r.hi);
  else if (lo && hi)
    s = std::string("must be in ") + (r.lo_open ? "(" : "[") + bound_number(r.lo) + ", " + bound_number(r.hi) +
        (r.hi_open ? ")" : "]");
  if (!s.empty() && r.why) s += std::string(" (") + r.why + ")";
  return s;
}

void ReadParameters::real(const char* key, Real& x, const Range& r, const char*) {
  if (node_.has(key)) x = Node::as_number(node_.raw(key), node_.at(key));
  if (!r.contains(x)) throw ConfigError(node_.at(key), range_text(r) + ", got " + show(value_or(key, x)));
}

void ReadParameters::degrees(const char* key, Real& radians, const Range& r, const char*) {
  const Real deg = node_.has(key) ? Node::as_number(node_.raw(key), node_.at(key)) : radians * 180 / M_PI;
  if (!r.contains(deg)) throw ConfigError(node_.at(key), range_text(r) + ", got " + show(value_or(key, deg)));
  radians = deg * M_PI / 180;
}

void ReadParameters::check(const char* problem, const char* key) {
  if (problem) throw ConfigError(*key ? node_.at(key) : node_.path(), problem);
}

nlohmann::json ReadParameters::value_or(const char* key, Real x) const { return node_.has(key) ? node_.raw(key) : nlohmann::json(x); }

}  // namespace tether
