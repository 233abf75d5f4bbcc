#include "expr/declared_system.hpp"

#include <ginac/ginac.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>

#include "expr/lexer.hpp"
#include "expr/repeated.hpp"
#include "registry/parameter_io.hpp"
#include "tether/engine/config_error.hpp"

namespace tether {

const std::vector<std::string>& declared_functions() {
  static const std::vector<std::string> f = {"sin",  "cos",  "tan", "asin", "acos", "atan", "atan2",
                                             "sinh", "cosh", "tanh", "exp", "log",  "sqrt", "pow"};
  return f;
}

namespace {

// The declared parameters as a Parameters declaration (core/parameters.hpp),
// read, written and listed by registry/parameter_io.hpp as a built-in one's.
struct ParameterList {
  std::vector<std::pair<std::string, Real>> values;
  template <class V>
  void describe(V& v) {
    for (auto& [name, x] : values) v.real(name.c_str(), x, Range::any(), "a declared parameter");
  }
};

}  // namespace

struct DeclaredSystem::Symbolic {
  using Step = std::pair<GiNaC::realsymbol, GiNaC::ex>;  // a named value of a straight-line program
  std::vector<GiNaC::realsymbol> q;                       // printed as q[i]
  std::vector<std::pair<GiNaC::realsymbol, Real>> prm;    // printed as prm.p_<name>
  GiNaC::ex potential;                                    // a frame's V, every definition substituted
  GiNaC::ex length_scale, energy_scale;
  // The potential and its gradient as a straight-line program, differentiated
  // in reverse mode over the definitions (GW08 ch. 3, the adjoint
  // of a straight-line program): `values` are the definitions V
  // uses, in dependency order (d_<name>); `potential_direct` is V over q and
  // them; `adjoints`, in reverse order, are dV/d(d_<name>) (a_<name>), each
  // summed from the few derivatives of the expressions that use it; and
  // gradient[i] is dV/dq_i over all of them. A definition shared by many
  // terms (a bond vector, an angle's cosine) is computed and differentiated
  // once, where substituting it first would copy it into every term of every
  // derivative.
  std::vector<Step> values, adjoints;
  GiNaC::ex potential_direct;
  std::vector<GiNaC::ex> gradient, constraints;
  std::vector<std::vector<GiNaC::ex>> jacobian;           // dg_i/dq_j
  std::vector<std::vector<GiNaC::ex>> frame;              // X_i's components along dq_j (index-1 systems)
  // source()'s text by type name, printed once.
  mutable std::mutex printed_mutex;
  mutable std::map<std::string, std::string> printed;
};

namespace {

bool is_identifier(const std::string& s) {
  return !s.empty() && lexer::starts_name(s[0]) && std::all_of(s.begin(), s.end(), lexer::in_name);
}

// The declared names an expression may use, by kind.
struct Names {
  std::set<std::string> coordinates, parameters, definitions;
  bool knows(const std::string& n) const {
    return coordinates.count(n) || parameters.count(n) || definitions.count(n);
  }
};

constexpr int max_signs = 8;  // + and - in a row (check_tokens): more is never meant

// Reads `text` token by token and refuses (ConfigError at `path`) the first
// character or name outside the grammar, with its position (1-based).
void check_tokens(const std::string& text, const Names& names, const std::string& path) {
  using lexer::at;
  int depth = 0, signs = 0;  // open parentheses; + and - in a row, no operand between
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '+' || c == '-') {
      if (++signs > max_signs) throw ConfigError(path, "has more than " + std::to_string(max_signs) + " signs in a row" + at(i));
    } else if (!lexer::is_space(c)) {
      signs = 0;
    }
    if (lexer::is_space(c)) {
      ++i;
    } else if (lexer::starts_number(text, i, text.size())) {
      i = lexer::number_end(text, i, text.size());
    } else if (lexer::starts_name(c)) {
      const std::size_t start = i;
      while (i < text.size() && lexer::in_name(text[i])) ++i;
      const std::string name = text.substr(start, i - start);
      std::size_t next = i;
      while (next < text.size() && lexer::is_space(text[next])) ++next;
      const bool call = next < text.size() && text[next] == '(';
      if (call && !lexer::is_function(name)) lexer::unknown_function(path, name, start);
      if (!call && !names.knows(name))
        throw ConfigError(path, "unknown symbol \"" + name.substr(0, 40) + "\"" + at(start) +
                                    ": not a coordinate, parameter or definition");
    } else if (std::string("+-*/^(),").find(c) != std::string::npos) {
      depth += c == '(' ? 1 : c == ')' ? -1 : 0;
      if (depth < 0) throw ConfigError(path, "a \")\" without its \"(\"" + at(i));
      if (depth > lexer::max_nesting) lexer::too_deep(path, i);
      ++i;
    } else {
      lexer::unexpected_character(path, c, i);
    }
  }
  if (depth > 0) throw ConfigError(path, "a \"(\" is not closed");
}

// GiNaC's reason for throwing, as a message shows it: "power::eval():
// division by zero" as "division by zero".
std::string ginac_reason(const std::exception& e) {
  std::string why = e.what();
  why = why.substr(0, why.find('\n'));
  if (const std::size_t colon = why.find("(): "); colon != std::string::npos) why = why.substr(colon + 4);
  return why.substr(0, 80);
}

// Runs `f`, GiNaC's work on the expression at `path`. GiNaC throws where
// mathematics has no value (0^z differentiated holds log(0); 1/w with w = 0
// written in): said as one ConfigError at `path`, `doing` and the reason.
template <class F>
auto at_path(const std::string& path, const std::string& doing, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const ConfigError&) {
    throw;
  } catch (const std::exception& e) {
    throw ConfigError(path, doing + " (" + ginac_reason(e) + ")");
  }
}

// Exact numbers stay exact (GiNaC computes 3^(1/2)*3^(1/2) = 3), so a
// constant power is computed in full: 2^1000000000 took 9 s and 0.7 GB. A
// constant exponent is held to 1024 in magnitude, and a power whose exact
// result would have more than this many bits is refused.
constexpr double max_exponent = 1024;
constexpr double max_exact_bits = 65536;

// A bound as a message writes it: 1024, not 1024.000000.
std::string whole(double x) { return std::to_string(static_cast<long long>(x)); }

// |x|, held below 1e300 (to_double of a larger exact number would overflow).
double magnitude(const GiNaC::numeric& x) {
  if (!x.is_real()) return HUGE_VAL;
  const GiNaC::numeric a = GiNaC::abs(x);
  return a > GiNaC::numeric(1e300) ? 1e300 : a.to_double();
}

// The bits of the exact numbers GiNaC would raise to a power with `e` as its
// base: a rational's numerator and denominator, a product's coefficient and
// its constant factors (sqrt(2) * x). Floating-point numbers do not grow.
double exact_bits(const GiNaC::ex& e) {
  using namespace GiNaC;
  if (is_a<numeric>(e)) {
    const numeric& x = ex_to<numeric>(e);
    if (!x.is_rational()) return 0;
    return double(x.numer().int_length()) + double(x.denom().int_length());
  }
  if (is_a<power>(e) && is_a<numeric>(e.op(0)) && is_a<numeric>(e.op(1)))
    return exact_bits(e.op(0)) * std::max(1.0, magnitude(ex_to<numeric>(e.op(1))));
  if (is_a<mul>(e)) {
    double bits = 0;
    for (std::size_t i = 0; i < e.nops(); ++i) bits += exact_bits(e.op(i));
    return bits;
  }
  return 0;
}

// Reads an expression of the grammar (its tokens checked by check_tokens)
// into GiNaC, by precedence:
//   sum     := product (('+' | '-') product)*
//   product := signed (('*' | '/') signed)*
//   signed  := ('+' | '-')* power
//   power   := primary ('^' ('+' | '-')* primary)?
//   primary := number | name | function '(' sum (',' sum)* ')' | '(' sum ')'
// as written mathematics and SymPy read it: -x^2 is -(x^2), x^-2*y is
// (x^-2)*y. a^b^c is refused: the two readings differ and writers differ on
// which is meant. Every error names its position; GiNaC's own parser names
// none, crashed on "sin()", and read 2*-x+y as 2*(-x+y).
class Reader {
 public:
  Reader(const std::string& text, const std::string& path, const GiNaC::symtab& table)
      : text_(text), path_(path), table_(table) {}

  GiNaC::ex read() {
    skip();
    GiNaC::ex e = sum();
    if (i_ < text_.size()) fail("expects an operator or the end", i_);
    return e;
  }

 private:
  // The text from `at` is quoted too: a repeated structure's expression is
  // read written out (x[i+1] as x__2), where positions shift.
  [[noreturn]] void fail(const std::string& what, std::size_t at) const {
    if (at >= text_.size()) throw ConfigError(path_, what + " at the end: the expression is cut short");
    const std::string rest = text_.substr(at, 24) + (text_.size() - at > 24 ? "..." : "");
    throw ConfigError(path_, what + lexer::at(at) + ": " +
                                 nlohmann::json(rest).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace));
  }
  void skip() {
    while (i_ < text_.size() && lexer::is_space(text_[i_])) ++i_;
  }
  bool next_is(char c) const { return i_ < text_.size() && text_[i_] == c; }
  void expect(char c, const std::string& what) {
    if (!next_is(c)) fail(what, i_);
    ++i_;
    skip();
  }
  // GiNaC evaluates as it builds: 1/0, log(0) and the like throw there.
  template <class F>
  GiNaC::ex built(F&& f, std::size_t at) const {
    try {
      return f();
    } catch (const std::exception& e) {
      fail("cannot be evaluated (" + ginac_reason(e) + ")", at);
    }
  }

  GiNaC::ex sum() {
    GiNaC::exvector terms{product()};
    while (next_is('+') || next_is('-')) {
      const bool minus = text_[i_] == '-';
      ++i_;
      skip();
      const GiNaC::ex t = product();
      terms.push_back(minus ? -t : t);
    }
    return terms.size() == 1 ? terms[0] : built([&] { return GiNaC::ex(GiNaC::add(terms)); }, i_);
  }

  GiNaC::ex product() {
    GiNaC::ex e = signed_power();
    while (next_is('*') || next_is('/')) {
      const std::size_t op = i_;
      const bool divide = text_[i_] == '/';
      ++i_;
      skip();
      const GiNaC::ex f = signed_power();
      if (divide && f.is_zero()) fail("divides by zero", op);  // said here: GiNaC's throw would leak its objects
      e = built([&] { return divide ? e / f : e * f; }, op);
    }
    return e;
  }

  // The signs before an operand; check_tokens has held them to a few.
  bool signs() {
    bool negative = false;
    while (next_is('+') || next_is('-')) {
      negative = negative != (text_[i_] == '-');
      ++i_;
      skip();
    }
    return negative;
  }

  GiNaC::ex signed_power() {
    const bool negative = signs();
    const GiNaC::ex e = power();
    return negative ? -e : e;
  }

  GiNaC::ex power() {
    const GiNaC::ex base = primary();
    if (!next_is('^')) return base;
    const std::size_t op = i_;
    ++i_;
    skip();
    const bool negative = signs();
    const std::size_t exponent_at = i_;
    GiNaC::ex exponent = primary();
    if (negative) exponent = -exponent;
    if (next_is('^'))
      fail("has a power of a power, a^b^c: write (a^b)^c or a^(b^c)", i_);
    return raised(base, exponent, op, exponent_at);
  }

  GiNaC::ex raised(const GiNaC::ex& base, const GiNaC::ex& exponent, std::size_t op, std::size_t exponent_at) const {
    if (GiNaC::is_a<GiNaC::numeric>(exponent)) {
      const GiNaC::numeric& x = GiNaC::ex_to<GiNaC::numeric>(exponent);
      if (base.is_zero() && !x.is_positive()) fail("raises 0 to a power of 0 or below", op);
      const double m = magnitude(x);
      if (!(m <= max_exponent))
        fail("raises to a constant power beyond " + whole(max_exponent) + " in magnitude", exponent_at);
      if (exact_bits(base) * std::max(1.0, m) > max_exact_bits)
        fail("makes an exact number of more than " + whole(max_exact_bits) + " bits", op);
    }
    return built([&] { return GiNaC::pow(base, exponent); }, op);
  }

  GiNaC::ex primary() {
    if (i_ >= text_.size()) fail("expects a number, a name or \"(\"", i_);
    const std::size_t start = i_;
    const char c = text_[i_];
    if (c == '(') {
      ++i_;
      skip();
      GiNaC::ex e = sum();
      expect(')', "expects \")\"");
      return e;
    }
    if (lexer::starts_number(text_, i_, text_.size())) {
      i_ = lexer::number_end(text_, i_, text_.size());
      const std::string digits = text_.substr(start, i_ - start);
      if (std::count(digits.begin(), digits.end(), '.') > 1) fail("is not a number", start);
      // GiNaC reads 1e99999999999999999999 for minutes: a number is a double's.
      const std::size_t e = digits.find_first_of("eE");
      if ((e != std::string::npos && digits.size() - e > 5) || std::isinf(std::strtod(digits.c_str(), nullptr)))
        fail("is a number beyond a double's range (1.8e308)", start);
      skip();
      return built([&] { return GiNaC::ex(GiNaC::numeric(digits.c_str())); }, start);
    }
    if (lexer::starts_name(c)) {
      while (i_ < text_.size() && lexer::in_name(text_[i_])) ++i_;
      const std::string name = text_.substr(start, i_ - start);
      skip();
      if (!next_is('(')) return table_.at(name);  // check_tokens has refused names not in the table
      ++i_;
      skip();
      GiNaC::exvector args{sum()};
      while (next_is(',')) {
        ++i_;
        skip();
        args.push_back(sum());
      }
      expect(')', "expects \",\" or \")\" in the arguments of " + name);
      return call(name, args, start);
    }
    fail("expects a number, a name or \"(\"", start);
  }

  // Each function of declared_functions() (lexer.hpp admits no other
  // name before "("): its arguments and the GiNaC function it builds; pow
  // goes through raised(), as ^ does.
  GiNaC::ex call(const std::string& name, const GiNaC::exvector& a, std::size_t at) const {
    using Make = GiNaC::ex (*)(const GiNaC::exvector&);
    static const std::map<std::string, std::pair<std::size_t, Make>> functions = {
        {"sin", {1, [](const GiNaC::exvector& x) -> GiNaC::ex { return GiNaC::sin(x[0]); }}},
        {"cos", {1, [](const GiNaC::exvector& x) -> GiNaC::ex { return GiNaC::cos(x[0]); }}},
        {"tan", {1, [](const GiNaC::exvector& x) -> GiNaC::ex { return GiNaC::tan(x[0]); }}},
        {"asin", {1, [](const GiNaC::exvector& x) -> GiNaC::ex { return GiNaC::asin(x[0]); }}},
        {"acos", {1, [](const GiNaC::exvector& x) -> GiNaC::ex { return GiNaC::acos(x[0]); }}},
        {"atan", {1, [](const GiNaC::exvector& x) -> GiNaC::ex { return GiNaC::atan(x[0]); }}},
        {"atan2", {2, [](const GiNaC::exvector& x) -> GiNaC::ex { return GiNaC::atan2(x[0], x[1]); }}},
        {"sinh", {1, [](const GiNaC::exvector& x) -> GiNaC::ex { return GiNaC::sinh(x[0]); }}},
        {"cosh", {1, [](const GiNaC::exvector& x) -> GiNaC::ex { return GiNaC::cosh(x[0]); }}},
        {"tanh", {1, [](const GiNaC::exvector& x) -> GiNaC::ex { return GiNaC::tanh(x[0]); }}},
        {"exp", {1, [](const GiNaC::exvector& x) -> GiNaC::ex { return GiNaC::exp(x[0]); }}},
        {"log", {1, [](const GiNaC::exvector& x) -> GiNaC::ex { return GiNaC::log(x[0]); }}},
        {"sqrt", {1, [](const GiNaC::exvector& x) -> GiNaC::ex { return GiNaC::sqrt(x[0]); }}},
        {"pow", {2, nullptr}}};
    const auto& [arity, make] = functions.at(name);
    if (a.size() != arity)
      fail(name + " takes " + std::to_string(arity) + " argument" + (arity == 1 ? "" : "s") + ", given " +
               std::to_string(a.size()),
           at);
    if (make == nullptr) return raised(a[0], a[1], at, at);
    return built([&] { return make(a); }, at);
  }


  const std::string& text_;
  const std::string& path_;
  const GiNaC::symtab& table_;
  std::size_t i_ = 0;
};

// The expression at `path`, its tokens checked, read against `table`.
GiNaC::ex parse(const nlohmann::json& j, const std::string& path, const Names& names, const GiNaC::symtab& table) {
  if (!j.is_string() && !j.is_number()) throw ConfigError(path, "must be an expression (a string) or a number");
  if (j.is_number()) {
    const double x = j.get<double>();
    if (!std::isfinite(x)) throw ConfigError(path, "must be finite");
    return GiNaC::ex(x);
  }
  const std::string text = j.get<std::string>();
  if (text.size() > (std::size_t(64) << 20)) throw ConfigError(path, "is longer than 64 MiB");  // written out (expr/repeated.cpp)
  if (text.find_first_not_of(" \t\n\r") == std::string::npos) throw ConfigError(path, "is empty");
  check_tokens(text, names, path);
  return Reader(text, path, table).read();
}

// `e` as C source: numbers, q[i], prm.p_<name>, the functions. GiNaC orders
// the terms of a sum or product by hashes that depend on addresses (so on
// the process), and with them the sign it leaves on a sum: x - L or
// -(L - x). Here terms and factors are ordered by their own text and each sum
// carries the sign that makes its text the smaller, so that a declaration
// prints one source (one cache key, one rounding) in every process.
struct Signed {
  bool negative = false;
  std::string text;  // of the magnitude
};

std::string with_sign(const Signed& s) { return s.negative ? "(-" + s.text + ")" : s.text; }

Signed canonical(const GiNaC::ex& e) {
  using namespace GiNaC;
  if (is_a<constant>(e)) {  // Pi, which acos(-1) and atan(1) are exactly: its double
    std::ostringstream s;
    s.precision(17);
    s << ex_to<numeric>(evalf(e)).to_double();
    return {false, s.str()};
  }
  if (is_a<add>(e)) {
    std::vector<std::string> plus, minus;
    for (std::size_t i = 0; i < e.nops(); ++i) {
      Signed t = canonical(e.op(i));
      plus.push_back(with_sign(t));
      t.negative = !t.negative;
      minus.push_back(with_sign(t));
    }
    std::sort(plus.begin(), plus.end());
    std::sort(minus.begin(), minus.end());
    const auto joined = [](const std::vector<std::string>& v) {
      std::string s = "(" + v[0];
      for (std::size_t i = 1; i < v.size(); ++i) s += "+" + v[i];
      return s + ")";
    };
    const std::string a = joined(plus), b = joined(minus);
    return a <= b ? Signed{false, a} : Signed{true, b};
  }
  if (is_a<mul>(e)) {
    bool negative = false;
    std::vector<std::string> parts;
    for (std::size_t i = 0; i < e.nops(); ++i) {
      const Signed f = canonical(e.op(i));
      negative = negative != f.negative;
      if (f.text != "1.0") parts.push_back(f.text);
    }
    std::sort(parts.begin(), parts.end());
    if (parts.empty()) return {negative, "1.0"};
    if (parts.size() == 1) return {negative, parts[0]};  // -x prints as x, negative
    std::string s = "(" + parts[0];
    for (std::size_t i = 1; i < parts.size(); ++i) s += "*" + parts[i];
    return {negative, s + ")"};
  }
  if (is_a<power>(e)) {
    // Integer and half-integer exponents up to 8 as products and a square root:
    // pow() costs tens of multiplications, and in lanes (core/lanes.hpp) it is
    // libm's, one lane at a time. The chain's torsion (cos^5) and the
    // derivatives of 1/sqrt (x^-3/2) have them.
    const ex exponent = e.op(1);
    const numeric twice = is_a<numeric>(exponent) ? ex_to<numeric>(exponent) * 2 : numeric(0);
    if (twice.is_integer() && !twice.is_zero() && abs(twice) <= 16) {
      const long t = twice.to_long(), whole = std::labs(t) / 2;  // the exponent is t/2
      const Signed base = canonical(e.op(0));
      const bool half = t % 2 != 0;
      // A half power takes the base with its sign (under the root); a whole one its magnitude.
      const std::string b = half ? with_sign(base) : base.text;
      std::string product;
      for (long k = 0; k < whole; ++k) product += (k ? "*" : "") + b;
      if (half) product += (whole ? "*sqrt(" : "sqrt(") + b + ")";
      const bool negative = !half && base.negative && whole % 2 != 0;
      return {negative, t > 0 ? "(" + product + ")" : "(1.0/(" + product + "))"};
    }
    return {false, "pow(" + with_sign(canonical(e.op(0))) + "," + with_sign(canonical(exponent)) + ")"};
  }
  if (is_a<function>(e)) {
    std::string s = ex_to<function>(e).get_name() + "(";
    for (std::size_t i = 0; i < e.nops(); ++i) s += (i ? "," : "") + with_sign(canonical(e.op(i)));
    return {false, s + ")"};
  }
  const bool negative = is_a<numeric>(e) && ex_to<numeric>(e).is_negative();
  std::ostringstream s;
  (negative ? ex(-e) : e).print(print_csrc_double(s));
  return {negative, s.str()};
}

std::string printed(const GiNaC::ex& e) { return with_sign(canonical(e)); }

// Refuses (at `path`) an expression whose C source would name anything but
// q, prm, a declared parameter, the C functions of the grammar and the
// `program` names (the potential's d_<definition> and a_<definition>): a
// derivative GiNaC can only write with a function of its own (csgn, a
// derivative of abs), and, defensively, anything the parser let through.
// Returns the length of that source.
std::size_t check_printable(const GiNaC::ex& e, const std::set<std::string>& parameters, const std::set<std::string>& program,
                     const std::string& path, const std::string& what) {
  static const std::set<std::string> allowed = [] {
    std::set<std::string> names(declared_functions().begin(), declared_functions().end());
    names.insert({"q", "prm"});
    return names;
  }();
  const std::string text = printed(e);
  for (std::size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (std::isdigit(c) || (c == '.' && i + 1 < text.size() && std::isdigit(static_cast<unsigned char>(text[i + 1])))) {
      // a number, its exponent included
      while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '.' ||
                                 ((text[i] == '+' || text[i] == '-') && (text[i - 1] == 'e' || text[i - 1] == 'E'))))
        ++i;
    } else if (std::isalpha(c) || c == '_') {
      const std::size_t start = i;
      while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_')) ++i;
      std::string name = text.substr(start, i - start);
      if (name == "prm" && i < text.size() && text[i] == '.') {  // prm.p_<a declared parameter>
        const std::size_t member = ++i;
        while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_')) ++i;
        name = text.substr(member, i - member);
        if (name.rfind("p_", 0) == 0 && parameters.count(name.substr(2))) continue;
      }
      if (name == "std")  // std::complex: GiNaC's I
        throw ConfigError(path, "has " + what + " that is not real (the square root or logarithm of a negative "
                                    "number, or the like)");
      if ((!allowed.count(name) && !program.count(name)) || name == "prm")
        throw ConfigError(path, "has " + what + " that C cannot compute (it needs \"" + name.substr(0, 40) +
                                    "\"): write it without that construct");
    } else if (std::string("+-*/()[], ").find(char(c)) != std::string::npos) {
      ++i;
    } else {
      throw ConfigError(path, "has " + what + " that C cannot compute (\"" + std::string(1, char(c)) + "\")");
    }
  }
  return text.size();
}

std::string number(Real x) {
  std::ostringstream s;
  s.precision(17);
  s << x;
  std::string t = s.str();
  if (t.find_first_of(".eEn") == std::string::npos) t += ".0";
  return t;
}

// How every substitution here is made: its keys are symbols. GiNaC's
// default matches each key as a pattern at every node (and walks a matched
// value again: a definition written in was walked as a tree, exponentially),
// and looks through the whole map for products at every sum.
constexpr unsigned by_symbol = GiNaC::subs_options::no_pattern | GiNaC::subs_options::pattern_is_not_product;

// The value of `e` at the symbols' values `at`.
Real evaluate(const GiNaC::ex& e, const GiNaC::exmap& at) {
  GiNaC::ex v;
  try {
    v = GiNaC::evalf(e.subs(at, by_symbol));
  } catch (const std::exception&) {  // GiNaC's: no value there (log(0), 1/0)
    return NAN;
  }
  if (!GiNaC::is_a<GiNaC::numeric>(v)) return NAN;
  const GiNaC::numeric n = GiNaC::ex_to<GiNaC::numeric>(v);
  if (!n.is_real()) return NAN;
  return n.to_double();
}

// The names of the symbols `e` holds.
std::set<std::string> symbols_of(const GiNaC::ex& e) {
  std::set<std::string> names;
  for (auto it = e.preorder_begin(); it != e.preorder_end(); ++it)
    if (GiNaC::is_a<GiNaC::symbol>(*it)) names.insert(GiNaC::ex_to<GiNaC::symbol>(*it).get_name());
  return names;
}

// An upper bound on an expression's size once its definitions are written
// in: its operations as a tree (shared pieces counted each time they
// appear), how deep they nest, and the bits of the exact numbers it makes.
struct Written {
  double nodes = 1, depth = 1, bits = 0;
};
constexpr double max_written_nodes = 20000;
constexpr double max_written_depth = lexer::max_nesting;
constexpr std::size_t max_source_bytes = std::size_t(2) << 20;       // every expression, printed once
constexpr std::size_t max_expression_bytes = std::size_t(512) << 10;  // one of them

// `placeholders`: the size of each definition written out, by its placeholder's name.
Written written_size(const GiNaC::ex& e, const std::map<std::string, Written>& placeholders) {
  using namespace GiNaC;
  if (is_a<symbol>(e)) {
    const auto d = placeholders.find(ex_to<symbol>(e).get_name());
    return d != placeholders.end() ? d->second : Written{};
  }
  if (is_a<numeric>(e)) return {1, 1, exact_bits(e)};
  std::vector<Written> ops;
  for (std::size_t i = 0; i < e.nops(); ++i) ops.push_back(written_size(e.op(i), placeholders));
  Written w;
  for (const Written& o : ops) {
    w.nodes += o.nodes;
    w.depth = std::max(w.depth, o.depth + 1);
    w.bits += o.bits;
  }
  if (is_a<power>(e)) {
    // A constant exponent raises the base's exact numbers to it; one that a
    // definition makes could become any number its bits can write.
    const double times = is_a<numeric>(e.op(1)) ? std::max(1.0, magnitude(ex_to<numeric>(e.op(1))))
                                                 : std::exp2(std::min(ops[1].bits, 1023.0));
    w.bits = ops[0].bits * times + ops[1].bits;
  }
  return w;
}

// A declaration without repeated structure (expr/repeated.hpp has written it out).
DeclaredSystem parse_plain(const nlohmann::json& j, const std::string& path) {
  if (!j.is_object()) throw ConfigError(path, "must be an object");
  const auto key = [&](const std::string& k) { return path + "." + k; };
  static const std::set<std::string> known = {"name",        "coordinates", "dof",          "mass",        "parameters",
                                              "definitions", "potential",   "constraints", "length_scale", "energy_scale",
                                              "frame"};
  for (const auto& [k, v] : j.items())
    if (!known.count(k)) throw ConfigError(key(k), "unknown key (known: name, sizes, coordinates or dof, mass, "
                                                   "parameters, definitions, potential, constraints, length_scale, "
                                                   "energy_scale, frame)");
  // A frame declares an index-1 sub-Riemannian system, H = 1/2 sum <p, X_i(q)>^2 + V(q) (LJM12 §6.2):
  // no constraints, no mass matrix and no scales (its relative errors are against its own energy).
  const bool framed = j.contains("frame");
  if (framed)
    for (const char* k : {"constraints", "mass", "length_scale", "energy_scale"})
      if (j.contains(k))
        throw ConfigError(key(k), "does not apply to a system declared by its frame (H = 1/2 sum <p, X_i(q)>^2 + V)");
  DeclaredSystem d;
  auto s = std::make_shared<DeclaredSystem::Symbolic>();

  if (!j.contains("name") || !j["name"].is_string()) throw ConfigError(key("name"), "must be the system's name (a string)");
  d.name = j["name"].get<std::string>();
  if (d.name.empty() || d.name.size() > 64 || !std::islower(static_cast<unsigned char>(d.name[0])) ||
      !std::all_of(d.name.begin(), d.name.end(),
                   [](unsigned char c) { return std::islower(c) || std::isdigit(c) || c == '_'; }))
    throw ConfigError(key("name"), "must be lower-case letters, digits and _, starting with a letter (at most 64)");

  // Coordinates: named, or q0 .. q{dof-1}.
  if (j.contains("coordinates") == j.contains("dof"))
    throw ConfigError(key("coordinates"), "give the coordinates' names, or \"dof\" for q0, q1, ..., not both");
  if (j.contains("coordinates")) {
    const auto& c = j["coordinates"];
    if (!c.is_array() || c.empty() || c.size() > 256)
      throw ConfigError(key("coordinates"), "must be an array of 1 to 256 names");
    for (std::size_t i = 0; i < c.size(); ++i) {
      const std::string p = key("coordinates") + "[" + std::to_string(i) + "]";
      if (!c[i].is_string() || !is_identifier(c[i].get<std::string>()) || c[i].get<std::string>().size() > 64)
        throw ConfigError(p, "must be a name: letters, digits and _, not starting with a digit");
      d.coordinates.push_back(c[i].get<std::string>());
    }
  } else {
    if (!j["dof"].is_number_integer() || j["dof"].get<std::int64_t>() < 1 || j["dof"].get<std::int64_t>() > 256)
      throw ConfigError(key("dof"), "must be an integer from 1 to 256");
    for (std::int64_t i = 0; i < j["dof"].get<std::int64_t>(); ++i) {
      std::string name = std::to_string(i);
      d.coordinates.push_back(name.insert(0, 1, 'q'));
    }
  }
  const std::size_t n = d.coordinates.size();

  Names names;
  GiNaC::symtab table;
  for (std::size_t i = 0; i < n; ++i) {
    if (names.coordinates.count(d.coordinates[i]) || lexer::is_function(d.coordinates[i]))
      throw ConfigError(key("coordinates") + "[" + std::to_string(i) + "]", "is given twice, or is a function's name");
    names.coordinates.insert(d.coordinates[i]);
    s->q.emplace_back("q[" + std::to_string(i) + "]");
    table[d.coordinates[i]] = s->q.back();
  }

  // Parameters, with their defaults.
  if (j.contains("parameters")) {
    const auto& p = j["parameters"];
    if (!p.is_object()) throw ConfigError(key("parameters"), "must be an object of names and values");
    for (const auto& [name, value] : p.items()) {
      const std::string where = key("parameters") + "." + name;
      if (!is_identifier(name) || name.size() > 64) throw ConfigError(where, "must be a name: letters, digits and _");
      if (names.coordinates.count(name) || lexer::is_function(name))
        throw ConfigError(where, "is also a coordinate's or a function's name");
      if (!value.is_number() || !std::isfinite(value.get<double>()))
        throw ConfigError(where, "must be a finite number (its default value)");
      names.parameters.insert(name);
      s->prm.emplace_back(GiNaC::realsymbol("prm.p_" + name), value.get<double>());
      table[name] = s->prm.back().first;
      d.parameters.emplace_back(name, value.get<double>());
    }
  }

  // Definitions: each parsed over every declared name, then substituted in
  // turn (in any order; a cycle is refused).
  std::map<std::string, GiNaC::realsymbol> placeholders;
  std::map<std::string, std::string> definition_of;  // a placeholder's name (d_<name>) -> the definition's
  std::map<std::string, GiNaC::ex> defined, raw;
  std::map<std::string, std::set<std::string>> raw_symbols;  // the symbols each definition holds directly
  std::map<std::string, std::vector<std::string>> uses_of;    // the definitions each one uses directly, by name
  std::vector<std::string> order;  // every definition after those it uses
  // The definitions among `symbols` (placeholders d_<name>), by name.
  const auto definitions_in = [&](const std::set<std::string>& symbols) {
    std::vector<std::string> found;
    for (const std::string& symbol : symbols)
      if (const auto d = definition_of.find(symbol); d != definition_of.end()) found.push_back(d->second);
    return found;
  };
  if (j.contains("definitions")) {
    const auto& defs = j["definitions"];
    if (!defs.is_object()) throw ConfigError(key("definitions"), "must be an object of names and expressions");
    for (const auto& [name, value] : defs.items()) {
      const std::string where = key("definitions") + "." + name;
      if (!is_identifier(name) || name.size() > 64) throw ConfigError(where, "must be a name: letters, digits and _");
      if (names.coordinates.count(name) || names.parameters.count(name) || lexer::is_function(name))
        throw ConfigError(where, "is also a coordinate's, a parameter's or a function's name");
      names.definitions.insert(name);
      placeholders.emplace(name, GiNaC::realsymbol("d_" + name));  // a C name: name is an identifier
      definition_of.emplace("d_" + name, name);
      table[name] = placeholders.at(name);
    }
    for (const auto& [name, value] : defs.items())
      raw[name] = parse(value, key("definitions") + "." + name, names, table);
    for (const auto& [name, e] : raw) {
      raw_symbols[name] = symbols_of(e);
      uses_of[name] = definitions_in(raw_symbols[name]);
    }
    // Every definition after those it uses: depth first from each name in
    // turn, on a stack of its own (thousands of definitions can chain).
    std::map<std::string, int> state;  // 1: on the stack, 2: ordered
    for (const auto& [root, e] : raw) {
      if (state[root]) continue;
      std::vector<std::pair<std::string, std::vector<std::string>>> stack;  // a definition and those it uses, left to visit
      const auto visit = [&](const std::string& name) {
        state[name] = 1;
        std::vector<std::string> uses(uses_of.at(name).rbegin(), uses_of.at(name).rend());  // popped from the back: in name order
        stack.emplace_back(name, std::move(uses));
      };
      visit(root);
      while (!stack.empty()) {
        auto& [name, uses] = stack.back();
        if (uses.empty()) {
          state[name] = 2;
          order.push_back(name);
          stack.pop_back();
          continue;
        }
        const std::string next = uses.back();
        uses.pop_back();
        if (state[next] == 1) throw ConfigError(key("definitions") + "." + next, "refers to itself through the definitions");
        if (state[next] == 0) visit(next);
      }
    }
  }
  // A constraint, a frame and a frame's V are differentiated and printed
  // whole, their definitions written in. Shared pieces make that a tree
  // exponentially larger than its text (d2 = d1*d1 + sin(d1), d3 = ...), and
  // GiNaC walks it as a tree: the size it would have is bounded first
  // (written_size), and a definition is written out only when one of them
  // uses it. V's own definitions are never written out (the program above).
  // Definitions and those they use, directly or through others.
  const auto with_their_uses = [&](std::vector<std::string> todo) {
    std::set<std::string> all(todo.begin(), todo.end());
    while (!todo.empty()) {
      const std::string name = todo.back();
      todo.pop_back();
      for (const std::string& u : uses_of.at(name))
        if (all.insert(u).second) todo.push_back(u);
    }
    return all;
  };
  std::map<std::string, Written> written;  // a placeholder's name -> its definition's size written out
  for (const std::string& name : order) written["d_" + name] = written_size(raw.at(name), written);
  const auto write_in = [&](const GiNaC::ex& e, const std::string& where) {
    const Written w = written_size(e, written);
    if (w.nodes > max_written_nodes)
      throw ConfigError(where, "has more than " + whole(max_written_nodes) +
                                   " operations with its definitions written in (it is differentiated whole): "
                                   "fewer definitions that use one another twice or more");
    if (w.depth > max_written_depth)
      throw ConfigError(where, "nests more than " + whole(max_written_depth) +
                                   " operations deep with its definitions written in (it is differentiated whole)");
    if (w.bits > max_exact_bits)
      throw ConfigError(where, "makes an exact number of more than " + whole(max_exact_bits) +
                                   " bits with its definitions written in");
    // The definitions it uses, directly or through others, written out in order.
    const std::set<std::string> needed = with_their_uses(definitions_in(symbols_of(e)));
    return at_path(where, "has no value with its definitions written in", [&] {
      for (const std::string& name : order)
        if (needed.count(name) && !defined.count(name)) {
          GiNaC::exmap uses;
          for (const std::string& u : uses_of.at(name)) uses[placeholders.at(u)] = defined.at(u);
          defined[name] = raw.at(name).subs(uses, by_symbol);
        }
      GiNaC::exmap uses;
      for (const std::string& name : needed) uses[placeholders.at(name)] = defined.at(name);
      return e.subs(uses, by_symbol);
    });
  };
  const auto expression = [&](const nlohmann::json& v, const std::string& where) {
    return write_in(parse(v, where, names, table), where);
  };

  s->potential_direct = j.contains("potential") ? parse(j["potential"], key("potential"), names, table) : GiNaC::ex(0);
  if (framed) s->potential = write_in(s->potential_direct, key("potential"));  // a frame's methods take V whole, by dual numbers
  if (framed) {
    const auto& f = j["frame"];
    if (!f.is_array() || f.empty() || f.size() > n)
      throw ConfigError(key("frame"), "must be an array of 1 to " + std::to_string(n) + " vector fields X_i(q), each "
                                      "an array of its " + std::to_string(n) + " components");
    for (std::size_t i = 0; i < f.size(); ++i) {
      const std::string where = key("frame") + "[" + std::to_string(i) + "]";
      if (!f[i].is_array() || f[i].size() != n)
        throw ConfigError(where, "must be an array of " + std::to_string(n) + " components (one per coordinate)");
      std::vector<GiNaC::ex> field;
      for (std::size_t c = 0; c < n; ++c)
        field.push_back(expression(f[i][c], where + "[" + std::to_string(c) + "]"));
      s->frame.push_back(field);
    }
    d.frame_size = int(f.size());
  }
  if (!framed) {
    if (!j.contains("constraints") || !j["constraints"].is_array() || j["constraints"].empty())
      throw ConfigError(key("constraints"), "must be an array of at least one expression g_i(q) (= 0 on the manifold), "
                                            "or give a \"frame\" for a sub-Riemannian system");
    if (j["constraints"].size() >= n)
      throw ConfigError(key("constraints"), "holds " + std::to_string(j["constraints"].size()) + " constraints for " +
                                                std::to_string(n) + " coordinates: fewer constraints than coordinates, "
                                                "or nothing is left to move");
    for (std::size_t i = 0; i < j["constraints"].size(); ++i)
      s->constraints.push_back(expression(j["constraints"][i], key("constraints") + "[" + std::to_string(i) + "]"));
  }

  // Mass: a number or one per coordinate.
  d.mass.assign(n, 1.0);
  if (j.contains("mass")) {
    const auto& m = j["mass"];
    if (m.is_number()) {
      d.mass.assign(n, m.get<double>());
    } else if (m.is_array() && m.size() == n && std::all_of(m.begin(), m.end(), [](const auto& x) { return x.is_number(); })) {
      for (std::size_t i = 0; i < n; ++i) d.mass[i] = m[i].get<double>();
    } else {
      throw ConfigError(key("mass"), "must be a number, or an array of " + std::to_string(n) + " (one per coordinate)");
    }
    for (Real x : d.mass)
      if (!(x > 0) || !std::isfinite(x)) throw ConfigError(key("mass"), "must be positive and finite");
  }

  // Scales: expressions of the parameters, positive at their defaults.
  Names prm_only;
  prm_only.parameters = names.parameters;
  GiNaC::symtab prm_table;
  for (const auto& [symbol, value] : s->prm) prm_table[symbol.get_name().substr(6)] = symbol;
  GiNaC::exmap defaults;
  for (const auto& [symbol, value] : s->prm) defaults[symbol] = value;
  for (const auto& [k, target, field] : {std::tuple{"length_scale", &s->length_scale, &d.length_scale},
                                         std::tuple{"energy_scale", &s->energy_scale, &d.energy_scale}}) {
    *target = j.contains(k) ? parse(j[k], key(k), prm_only, prm_table) : GiNaC::ex(1);
    *field = evaluate(*target, defaults);
    if (!(*field > 0) || !std::isfinite(*field))
      throw ConfigError(key(k), "must be positive at the parameters' defaults, got " + number(*field));
  }

  // Exact derivatives: V's by the program above, the constraints' (small) of their substituted form.
  // Who holds which symbol directly is found once (symbols_of), not asked
  // of every expression for every symbol: with a chain's hundreds of
  // definitions that had been most of a cached start.
  {
    // V's terms (a sum's, or V itself), and which of them hold each symbol.
    std::vector<GiNaC::ex> terms;
    if (GiNaC::is_a<GiNaC::add>(s->potential_direct))
      for (std::size_t t = 0; t < s->potential_direct.nops(); ++t) terms.push_back(s->potential_direct.op(t));
    else
      terms.push_back(s->potential_direct);
    std::map<std::string, std::vector<std::size_t>> terms_holding;
    for (std::size_t t = 0; t < terms.size(); ++t)
      for (const std::string& symbol : symbols_of(terms[t])) terms_holding[symbol].push_back(t);
    // The definitions V uses, directly or through others.
    std::set<std::string> held;  // the symbols V's terms hold
    for (const auto& [symbol, holding] : terms_holding) held.insert(symbol);
    const std::set<std::string> used = with_their_uses(definitions_in(held));
    std::vector<std::string> steps;
    std::map<std::string, std::vector<std::string>> users;  // a symbol -> the steps that hold it directly, in order
    for (const auto& name : order)
      if (used.count(name)) {
        steps.push_back(name);
        s->values.emplace_back(placeholders.at(name), raw.at(name));
        for (const std::string& symbol : raw_symbols.at(name)) users[symbol].push_back(name);
      }
    // adjoint(x): dV/dx through the expressions that use x directly, each of whose adjoints is known by then.
    std::map<std::string, GiNaC::realsymbol> adjoint;
    const auto total = [&](const GiNaC::realsymbol& x) {
      return at_path(key("potential"), "has no derivative", [&] {
        GiNaC::exvector sum;  // one add at the end: adding term by term is quadratic in a coordinate's many users
        if (const auto t = terms_holding.find(x.get_name()); t != terms_holding.end())
          for (std::size_t k : t->second) sum.push_back(terms[k].diff(x));
        if (const auto u = users.find(x.get_name()); u != users.end())
          for (const std::string& name : u->second)
            if (adjoint.count(name)) sum.push_back(adjoint.at(name) * raw.at(name).diff(x));
        return GiNaC::ex(GiNaC::add(sum));
      });
    };
    for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
      const GiNaC::realsymbol a("a_" + *it);
      s->adjoints.emplace_back(a, total(placeholders.at(*it)));
      adjoint.emplace(*it, a);
    }
    for (std::size_t i = 0; i < n; ++i) s->gradient.push_back(total(s->q[i]));
  }
  for (std::size_t r = 0; r < s->constraints.size(); ++r) {
    const GiNaC::ex& g = s->constraints[r];
    const std::set<std::string> holds = symbols_of(g);
    std::vector<GiNaC::ex> row;
    at_path(key("constraints") + "[" + std::to_string(r) + "]", "has no derivative", [&] {
      for (std::size_t i = 0; i < n; ++i) row.push_back(holds.count(s->q[i].get_name()) ? g.diff(s->q[i]) : GiNaC::ex(0));
    });
    s->jacobian.push_back(row);
  }
  std::set<std::string> parameter_names(names.parameters.begin(), names.parameters.end());
  std::set<std::string> program_names;
  for (const auto& steps : {&s->values, &s->adjoints})
    for (const auto& [symbol, value] : *steps) program_names.insert(symbol.get_name());
  // The generated source is compiled at first use, at about 20 kB/s on two
  // cores (a 64-bead chain's 0.7 MB in 37 s; its longest expression is 15
  // kB), and more slowly in one long expression (a sum of 20000 terms, 0.5
  // MB, 7 s; of 60000, 111 s). A declaration whose expressions print to
  // more than max_source_bytes is refused here, not left to the compiler for
  // many minutes, and so is one expression longer than max_expression_bytes
  // (1.4 MB of nested derivatives crashed cc1plus).
  std::size_t source_bytes = 0;
  const auto printable = [&](const GiNaC::ex& e, const std::set<std::string>& parameters,
                             const std::set<std::string>& program, const std::string& where, const std::string& what) {
    const std::size_t bytes = check_printable(e, parameters, program, where, what);
    if (bytes > max_expression_bytes)
      throw ConfigError(where, "has " + what + " that prints as " + std::to_string(bytes >> 10) + " kB of C++, more than the " +
                                   std::to_string(max_expression_bytes >> 10) + " kB a compiler takes in one expression");
    if ((source_bytes += bytes) > max_source_bytes)
      throw ConfigError(where, "makes the generated source longer than " + std::to_string(max_source_bytes >> 20) +
                                   " MB with the expressions before it: too long to compile at first use");
  };
  if (framed) printable(s->potential, parameter_names, {}, key("potential"), "a value");
  printable(s->potential_direct, parameter_names, program_names, key("potential"), "a value");
  for (const auto& [symbol, value] : s->values) printable(value, parameter_names, program_names, key("potential"), "a value");
  for (const auto& [symbol, value] : s->adjoints)
    printable(value, parameter_names, program_names, key("potential"), "a derivative");
  for (std::size_t i = 0; i < n; ++i)
    printable(s->gradient[i], parameter_names, program_names, key("potential"), "a derivative");
  for (std::size_t i = 0; i < s->constraints.size(); ++i) {
    const std::string where = key("constraints") + "[" + std::to_string(i) + "]";
    printable(s->constraints[i], parameter_names, {}, where, "a value");
    for (const auto& x : s->jacobian[i]) printable(x, parameter_names, {}, where, "a derivative");
  }
  for (const auto& [k, e] : {std::pair{"length_scale", &s->length_scale}, std::pair{"energy_scale", &s->energy_scale}})
    printable(*e, parameter_names, {}, key(k), "a value");
  for (std::size_t i = 0; i < s->frame.size(); ++i)
    for (std::size_t c = 0; c < n; ++c)
      printable(s->frame[i][c], parameter_names, {},
                      key("frame") + "[" + std::to_string(i) + "][" + std::to_string(c) + "]", "a value");
  d.symbolic = s;
  ListParameters schema;
  ParameterList{d.parameters}.describe(schema);
  d.info = declared_system_info(d.name, framed ? Family::nonholonomic : Family::holonomic, int(n), schema.out);
  return d;
}

}  // namespace

DeclaredSystem parse_declared_system(const nlohmann::json& j, const std::string& path) {
  const ExpandedDeclaration plain = expand_repeated(j, path);
  try {
    return parse_plain(plain.declaration, path);
  } catch (const ConfigError& e) {
    throw plain.as_written(e);
  }
}

std::shared_ptr<const DeclaredSystem> declare_system(const Node& declare) {
  return std::make_shared<const DeclaredSystem>(parse_declared_system(declare.json(), declare.path()));
}

void read_declared_parameters(const DeclaredSystem& d, const Node& parameters) {
  std::set<std::string> names;
  for (const auto& [name, value] : d.parameters) names.insert(name);
  parameters.only(names);
  ParameterList list{d.parameters};
  ReadParameters read(parameters);
  list.describe(read);
}

std::string DeclaredSystem::source(const std::string& type_name) const {
  if (!builtin_type.empty())
    return "#include \"" + builtin_header + "\"\nnamespace tether {\nusing " + type_name + " = " + builtin_type +
           ";\n}  // namespace tether\n";
  // Printed once per type name: `tether run` asks twice (its check, then its
  // run), and a 64-bead chain's source takes 60 ms of a 0.27 s cached start.
  const std::lock_guard<std::mutex> lock(symbolic->printed_mutex);
  if (const auto it = symbolic->printed.find(type_name); it != symbolic->printed.end()) return it->second;
  return symbolic->printed[type_name] = print_source(type_name);
}

std::string DeclaredSystem::print_source(const std::string& type_name) const {
  const Symbolic& s = *symbolic;
  const std::size_t n = coordinates.size(), k = s.constraints.size();
  const std::string N = std::to_string(n), K = std::to_string(k);
  // G M^-1 G^T has an entry (i, j) only where constraints i and j share a
  // coordinate (M is diagonal). Where that leaves it tridiagonal (a chain's
  // bonds, each touching the next), it is solved as the built-in chain's is:
  // by the Thomas algorithm, without pivoting (a Gram matrix of a full-rank G
  // is symmetric positive definite, and RATTLE's G(q1) M^-1 G(q0)^T near it);
  // else by a pivoted LU. Either runs in lanes of trajectories on the cpu
  // backend (a dense one up to kLanesLU constraints, core/small_solve.hpp).
  const auto nonzero = [&](std::size_t i, std::size_t c) { return !s.jacobian[i][c].is_zero(); };
  const auto coupled = [&](std::size_t i, std::size_t j) {
    for (std::size_t c = 0; c < n; ++c)
      if (nonzero(i, c) && nonzero(j, c)) return true;
    return false;
  };
  bool tridiagonal = k > 1;
  for (std::size_t i = 0; i < k; ++i)
    for (std::size_t j = i + 2; j < k; ++j) tridiagonal = tridiagonal && !coupled(i, j);
  const std::string gram_type = tridiagonal ? "TridiagonalMatrix" : "DenseMatrix";
  std::ostringstream o;
  o << "// Generated by tether from the declaration of \"" << name << "\" (src/expr/declared_system.cpp).\n"
    << "#include \"tether/core/dual.hpp\"\n#include \"tether/core/parameters.hpp\"\n"
    << "#include \"tether/core/small_solve.hpp\"\n#include \"tether/systems/generalized_hamiltonian.hpp\"\n"
    << "#include <cmath>\n\nnamespace tether {\n\n"
    << "struct " << type_name << " {\n"
    << "  static constexpr const char* name = \"" << name << "\";\n"
    << "  static constexpr const char* description = \"a system declared in a config\";\n"
    << "  static constexpr const char* citation = \"declared by its user\";\n"
    << "  static constexpr int dof = " << N << ";\n";
  if (frame_size > 0) {
    o << "  static constexpr Form form = Form::canonical;  // H = 1/2 sum <p, X_i(q)>^2 + V (LJM12 §6.2)\n"
      << "  static constexpr int multiplier_count = 0;\n"
      << "  static constexpr int frame_size = " << frame_size << ";\n\n";
  } else {
    o << "  static constexpr int constraint_count = " << K << ";\n"
      << "  using Gram = " << gram_type << "<" << K << ">;\n\n";
  }
  o << "  struct Parameters {\n";
  for (const auto& [p, value] : parameters) o << "    Real p_" << p << " = " << number(value) << ";\n";
  o << "    template <class V>\n    void describe(V& v) {\n";
  for (const auto& [p, value] : parameters)
    o << "      v.real(\"" << p << "\", p_" << p << ", Range::any(), \"a declared parameter\");\n";
  o << "      (void)v;\n    }\n  };\n  Parameters prm;\n\n";
  const auto body = [&](const GiNaC::ex& e) { return printed(e); };
  if (frame_size > 0) {  // any scalar T: the methods differentiate with dual numbers
    o << "  template <class T>\n  TETHER_HD void frame(const Arr<T, " << N << ">& q, T (&x)[" << frame_size << "][" << N
      << "]) const {\n    (void)q;\n";
    for (int i = 0; i < frame_size; ++i)
      for (std::size_t c = 0; c < n; ++c) o << "    x[" << i << "][" << c << "] = T(" << body(s.frame[i][c]) << ");\n";
    o << "  }\n  template <class T>\n  TETHER_HD T potential(const Arr<T, " << N
      << ">& q) const {\n    (void)q;\n    return T(" << body(s.potential) << ");\n  }\n};\n\n}  // namespace tether\n";
    return o.str();
  }
  // The step functions take any scalar T (Real, or Lanes<W> on the cpu
  // backend, core/lanes.hpp) where the Gram matrix allows it; each value is
  // made a T, so that expressions of the parameters alone fit too.
  const std::string VecN = "Vec<" + N + ", typename X::Scalar>", VecK = "Vec<" + K + ", typename X::Scalar>";
  const std::string scalar = "    using T = typename X::Scalar;\n";
  o << "  static constexpr bool runs_in_lanes = Gram::solves_in_lanes;\n\n";
  const auto steps = [&](const std::vector<Symbolic::Step>& program) {
    for (const auto& [symbol, value] : program) o << "    const T " << symbol.get_name() << " = T(" << body(value) << ");\n";
  };
  o << "  TETHER_HD Real potential(const Vec<" << N << ">& q) const {\n    using T = Real;\n    (void)q;\n";
  steps(s.values);
  o << "    return " << body(s.potential_direct) << ";\n  }\n";
  o << "  template <class X>\n  TETHER_HD " << VecN << " potential_gradient(const Eigen::MatrixBase<X>& q) const {\n"
    << scalar << "    (void)q;\n";
  steps(s.values);
  steps(s.adjoints);
  o << "    " << VecN << " r;\n";
  for (std::size_t i = 0; i < n; ++i) o << "    r[" << i << "] = T(" << body(s.gradient[i]) << ");\n";
  o << "    return r;\n  }\n";
  o << "  template <class X>\n  TETHER_HD " << VecK << " constraints(const Eigen::MatrixBase<X>& q) const {\n" << scalar
    << "    " << VecK << " r;\n";
  for (std::size_t i = 0; i < k; ++i) o << "    r[" << i << "] = T(" << body(s.constraints[i]) << ");\n";
  o << "    return r;\n  }\n";
  // G's structural non-zeros (a chain's bond touches two beads of N), known
  // exactly here: the products with G and the Gram matrix compute and sum
  // only those.
  std::vector<std::pair<std::size_t, std::size_t>> entries;  // (row, column), row by row
  std::map<std::pair<std::size_t, std::size_t>, std::size_t> slot;
  for (std::size_t i = 0; i < k; ++i)
    for (std::size_t c = 0; c < n; ++c)
      if (nonzero(i, c)) {
        slot[{i, c}] = entries.size();
        entries.emplace_back(i, c);
      }
  const std::string NNZ = std::to_string(std::max<std::size_t>(entries.size(), 1));
  const auto g = [&](const char* array, std::size_t i, std::size_t c) {
    return std::string(array) + "[" + std::to_string(slot.at({i, c})) + "]";
  };
  o << "  // G(q) = dg/dq, exact: its structural non-zeros, row by row.\n  template <class X>\n"
    << "  TETHER_HD void jacobian_nonzeros(const Eigen::MatrixBase<X>& q, typename X::Scalar (&g)[" << NNZ
    << "]) const {\n" << scalar << "    (void)q;\n";
  for (std::size_t e = 0; e < entries.size(); ++e)
    o << "    g[" << e << "] = T(" << body(s.jacobian[entries[e].first][entries[e].second]) << ");\n";
  o << "  }\n  template <class X>\n  TETHER_HD Mat<" << K << ", " << N
    << ", typename X::Scalar> jacobian(const Eigen::MatrixBase<X>& q) const {\n" << scalar << "    T g[" << NNZ
    << "];\n    jacobian_nonzeros(q, g);\n    Mat<" << K << ", " << N << ", T> G;\n    G.setConstant(T(0.0));\n";
  for (const auto& [i, c] : entries) o << "    G(" << i << ", " << c << ") = " << g("g", i, c) << ";\n";
  o << "    return G;\n  }\n";
  const auto sum = [](const std::vector<std::string>& terms) {
    if (terms.empty()) return std::string("T(0.0)");
    std::string t = terms[0];
    for (std::size_t x = 1; x < terms.size(); ++x) t += " + " + terms[x];
    return t;
  };
  o << "  template <class X, class Y>\n  TETHER_HD " << VecK
    << " constraint_jacobian_times(const Eigen::MatrixBase<X>& q, const Eigen::MatrixBase<Y>& v) const {\n" << scalar
    << "    T g[" << NNZ << "];\n    jacobian_nonzeros(q, g);\n    " << VecK << " r;\n";
  for (std::size_t i = 0; i < k; ++i) {
    std::vector<std::string> terms;
    for (std::size_t c = 0; c < n; ++c)
      if (nonzero(i, c)) terms.push_back(g("g", i, c) + " * v[" + std::to_string(c) + "]");
    o << "    r[" << i << "] = " << sum(terms) << ";\n";
  }
  o << "    return r;\n  }\n";
  o << "  template <class X, class Y>\n  TETHER_HD " << VecN
    << " constraint_transpose_times(const Eigen::MatrixBase<X>& q, const Eigen::MatrixBase<Y>& lambda) const {\n"
    << scalar << "    T g[" << NNZ << "];\n    jacobian_nonzeros(q, g);\n    " << VecN << " r;\n";
  for (std::size_t c = 0; c < n; ++c) {
    std::vector<std::string> terms;
    for (std::size_t i = 0; i < k; ++i)
      if (nonzero(i, c)) terms.push_back(g("g", i, c) + " * lambda[" + std::to_string(i) + "]");
    o << "    r[" << c << "] = " << sum(terms) << ";\n";
  }
  o << "    return r;\n  }\n";
  o << "  // G(qa) M^-1 G(qb)^T.\n  template <class X, class Y>\n  TETHER_HD " << gram_type << "<" << K
    << ", typename X::Scalar> gram(const Eigen::MatrixBase<X>& qa, const Eigen::MatrixBase<Y>& qb) const {\n"
    << scalar << "    T ga[" << NNZ << "], gb[" << NNZ << "];\n    jacobian_nonzeros(qa, ga);\n"
    << "    jacobian_nonzeros(qb, gb);\n    const Vec<" << N << "> w = inverse_mass();\n    " << gram_type << "<" << K
    << ", T> m;\n";
  const auto entry = [&](std::size_t i, std::size_t j2) {
    std::vector<std::string> terms;
    for (std::size_t c = 0; c < n; ++c)
      if (nonzero(i, c) && nonzero(j2, c))
        terms.push_back(g("ga", i, c) + " * w[" + std::to_string(c) + "] * " + g("gb", j2, c));
    return sum(terms);
  };
  for (std::size_t i = 0; i < k; ++i) {
    if (!tridiagonal) {
      for (std::size_t j2 = 0; j2 < k; ++j2) o << "    m.a(" << i << ", " << j2 << ") = " << entry(i, j2) << ";\n";
      continue;
    }
    o << "    m.lower[" << i << "] = " << (i > 0 ? entry(i, i - 1) : "T(0.0)") << ";\n"
      << "    m.diag[" << i << "] = " << entry(i, i) << ";\n"
      << "    m.upper[" << i << "] = " << (i + 1 < k ? entry(i, i + 1) : "T(0.0)") << ";\n";
  }
  o << "    return m;\n  }\n";
  o << "  TETHER_HD static Vec<" << N << "> mass() {\n    Vec<" << N << "> m;\n";
  for (std::size_t i = 0; i < n; ++i) o << "    m[" << i << "] = " << number(mass[i]) << ";\n";
  o << "    return m;\n  }\n";
  o << "  TETHER_HD static Vec<" << N << "> inverse_mass() { return mass().cwiseInverse(); }\n";
  o << "  template <class X>\n  TETHER_HD " << VecN << " mass_times(const Eigen::MatrixBase<X>& v) const {\n"
    << "    const Vec<" << N << "> m = mass();\n    " << VecN << " r;\n    for (int c = 0; c < " << N
    << "; ++c) r[c] = v[c] * m[c];\n    return r;\n  }\n";
  // M^-1 p by the reciprocals, as the built-in systems apply it (folded here: the masses are constants).
  o << "  template <class X>\n  TETHER_HD " << VecN << " inverse_mass_times(const Eigen::MatrixBase<X>& p) const {\n"
    << "    const Vec<" << N << "> w = inverse_mass();\n    " << VecN << " r;\n    for (int c = 0; c < " << N
    << "; ++c) r[c] = p[c] * w[c];\n    return r;\n  }\n";
  o << "  TETHER_HD Vec<" << N << "> sqrt_mass_times(const Vec<" << N
    << ">& v) const { return mass().cwiseSqrt().cwiseProduct(v); }\n";
  o << "  TETHER_HD Real length_scale() const { return " << body(s.length_scale) << "; }\n";
  o << "  TETHER_HD Real energy_scale() const { return " << body(s.energy_scale) << "; }\n";
  o << "};\n\n}  // namespace tether\n";
  return o.str();
}

namespace {

GiNaC::exmap values_at(const DeclaredSystem::Symbolic& s, const std::vector<Real>& q) {
  GiNaC::exmap at;
  for (std::size_t i = 0; i < s.q.size(); ++i) at[s.q[i]] = q.at(i);
  for (const auto& [symbol, value] : s.prm) at[symbol] = value;
  return at;
}

// The potential's program run at q, as the generated source runs it: every
// value and adjoint in the map; none where one of them is not a finite number.
std::optional<GiNaC::exmap> program_at(const DeclaredSystem::Symbolic& s, const std::vector<Real>& q) {
  GiNaC::exmap at = values_at(s, q);
  for (const auto& program : {&s.values, &s.adjoints})
    for (const auto& [symbol, value] : *program) {
      const Real x = evaluate(value, at);
      if (!std::isfinite(x)) return std::nullopt;
      at[symbol] = x;
    }
  return at;
}

}  // namespace

Real DeclaredSystem::potential_at(const std::vector<Real>& q) const {
  const auto at = program_at(*symbolic, q);
  return at ? evaluate(symbolic->potential_direct, *at) : NAN;
}

std::vector<Real> DeclaredSystem::gradient_at(const std::vector<Real>& q) const {
  const auto at = program_at(*symbolic, q);
  std::vector<Real> r;
  for (const auto& e : symbolic->gradient) r.push_back(at ? evaluate(e, *at) : NAN);
  return r;
}

std::vector<Real> DeclaredSystem::constraints_at(const std::vector<Real>& q) const {
  const GiNaC::exmap at = values_at(*symbolic, q);
  std::vector<Real> r;
  for (const auto& e : symbolic->constraints) r.push_back(evaluate(e, at));
  return r;
}

namespace {

std::vector<std::vector<Real>> evaluated(const std::vector<std::vector<GiNaC::ex>>& rows, const GiNaC::exmap& at) {
  std::vector<std::vector<Real>> r;
  for (const auto& row : rows) {
    r.emplace_back();
    for (const auto& e : row) r.back().push_back(evaluate(e, at));
  }
  return r;
}

}  // namespace

std::vector<std::vector<Real>> DeclaredSystem::jacobian_at(const std::vector<Real>& q) const {
  return evaluated(symbolic->jacobian, values_at(*symbolic, q));
}

std::vector<std::vector<Real>> DeclaredSystem::frame_at(const std::vector<Real>& q) const {
  return evaluated(symbolic->frame, values_at(*symbolic, q));
}

}  // namespace tether
