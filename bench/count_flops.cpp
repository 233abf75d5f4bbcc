// tether_count_flops: the floating-point operations of one step, counted
// exactly by running the step code with a scalar that counts what is done to
// it: this unit compiles the step library with Real = Counted (TETHER_REAL,
// core/types.hpp). For the roofline figure of bench/README.md: flops per step
// times trajectory-steps per second, against the machine's FP64 peak.
//
//     tether_count_flops [steps]      # prints one JSON document
//
// Counted as executed, Newton iterations included (their number per step is
// printed too): one flop per add, subtract, multiply, divide and square root,
// none for negations, comparisons and copies. An operation on two constants
// of the code (literals, tableau entries) is not counted: a compiler folds it.
// The step size, the system's parameters and the states are values the step
// code reads at run time.
#include <Eigen/Core>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace tether::counting {

struct Tally {
  std::uint64_t add = 0, mul = 0, div = 0, sqrt = 0, other = 0;
};
inline Tally tally;

// known: a constant of the code, whose arithmetic a compiler does once.
struct Counted {
  double x = 0;
  bool known = true;
  Counted() = default;
  constexpr Counted(double v) : x(v) {}
  static Counted variable(double v) {
    Counted c(v);
    c.known = false;
    return c;
  }
};

inline Counted counted_op(std::uint64_t& field, Counted a, Counted b, double r) {
  if (a.known && b.known) return Counted(r);
  ++field;
  return Counted::variable(r);
}

#define TETHER_COUNT_OP(op, field)                                                                 \
  inline Counted operator op(Counted a, Counted b) { return counted_op(tally.field, a, b, a.x op b.x); } \
  inline Counted operator op(Counted a, double b) { return a op Counted(b); }                     \
  inline Counted operator op(double a, Counted b) { return Counted(a) op b; }                     \
  inline Counted& operator op##=(Counted& a, Counted b) { return a = a op b; }
TETHER_COUNT_OP(+, add)
TETHER_COUNT_OP(-, add)
TETHER_COUNT_OP(*, mul)
TETHER_COUNT_OP(/, div)
#undef TETHER_COUNT_OP
inline Counted operator-(Counted a) { return a.x = -a.x, a; }
#define TETHER_COUNT_CMP(op)                                                             \
  inline bool operator op(Counted a, Counted b) { return a.x op b.x; }                  \
  inline bool operator op(Counted a, double b) { return a.x op b; }                     \
  inline bool operator op(double a, Counted b) { return a op b.x; }
TETHER_COUNT_CMP(<)
TETHER_COUNT_CMP(<=)
TETHER_COUNT_CMP(>)
TETHER_COUNT_CMP(>=)
TETHER_COUNT_CMP(==)
TETHER_COUNT_CMP(!=)
#undef TETHER_COUNT_CMP
inline Counted sqrt(Counted a) { return counted_op(tally.sqrt, a, a, std::sqrt(a.x)); }
inline Counted fabs(Counted a) { return a.x = std::fabs(a.x), a; }
inline Counted abs(Counted a) { return fabs(a); }
inline Counted fmax(Counted a, Counted b) { return a.x >= b.x || b.x != b.x ? a : b; }
// Transcendentals: none in the steps counted here, but the initial states'
// draws use them; counted apart (a GPU library call, not one instruction).
#define TETHER_COUNT_FN(fn) \
  inline Counted fn(Counted a) { return counted_op(tally.other, a, a, std::fn(a.x)); }
TETHER_COUNT_FN(log)
TETHER_COUNT_FN(exp)
TETHER_COUNT_FN(sin)
TETHER_COUNT_FN(cos)
TETHER_COUNT_FN(expm1)
TETHER_COUNT_FN(log1p)
#undef TETHER_COUNT_FN

}  // namespace tether::counting

namespace Eigen {
template <>
struct NumTraits<tether::counting::Counted> : GenericNumTraits<double> {
  using Real = tether::counting::Counted;
  using NonInteger = Real;
  using Nested = Real;
  using Literal = Real;
  enum { IsComplex = 0, IsInteger = 0, IsSigned = 1, RequireInitialization = 0, ReadCost = 1, AddCost = 1, MulCost = 1 };
};
template <typename Op>
struct ScalarBinaryOpTraits<tether::counting::Counted, double, Op> {
  using ReturnType = tether::counting::Counted;
};
template <typename Op>
struct ScalarBinaryOpTraits<double, tether::counting::Counted, Op> {
  using ReturnType = tether::counting::Counted;
};
}  // namespace Eigen

#define TETHER_REAL ::tether::counting::Counted
#include "tether/core/random.hpp"
#include "tether/methods/gauss_legendre.hpp"
#include "tether/methods/rattle.hpp"
#include "tether/systems/chain.hpp"
#include "tether/systems/double_pendulum.hpp"
#include "tether/systems/four_bar.hpp"
#include "tether/systems/heisenberg.hpp"
#include "tether/systems/spherical_pendulum.hpp"

namespace tether {

using counting::Counted;

// Every value of a state is one the step reads at run time.
template <int N>
Vec<N> variable(const Vec<N>& v) {
  Vec<N> r;
  for (int i = 0; i < N; ++i) r[i] = Counted::variable(v[i].x);
  return r;
}

// A system's parameters are kernel arguments: values read at run time too.
struct ReadAtRunTime {
  void real(const char*, Real& x, const Range&, const char*) { x = Counted::variable(x.x); }
  void degrees(const char* key, Real& x, const Range& r, const char* meaning) { real(key, x, r, meaning); }
  template <int N>
  void reals(const char*, Real (&x)[N], const char*) {
    for (Real& c : x) c = Counted::variable(c.x);
  }
  template <class... A>
  void choice(A&&...) {}
  template <class... A>
  void tableau(A&&...) {}
  void check(const char*, const char*) {}
};

template <class S>
S read_at_run_time(S sys) {
  ReadAtRunTime v;
  sys.prm.describe(v);
  return sys;
}

template <class Start>
void report(const char* label, const char* method, double h, int steps, const counting::Tally& t, long iterations,
            bool last) {
  const double per = 1.0 / steps;
  std::printf("    {\"case\": \"%s\", \"method\": \"%s\", \"dt\": %g, \"steps\": %d, \"newton_iterations_per_step\": %.3f,\n"
              "     \"per_step\": {\"add\": %.1f, \"mul\": %.1f, \"div\": %.1f, \"sqrt\": %.1f, \"flops\": %.1f}}%s\n",
              label, method, h, steps, iterations * per, t.add * per, t.mul * per, t.div * per, t.sqrt * per,
              (t.add + t.mul + t.div + t.sqrt) * per, last ? "" : ",");
  if (t.other) std::fprintf(stderr, "tether_count_flops: %s took transcendentals in its steps\n", label), std::exit(1);
}

// One thermal trajectory of S stepped by RATTLE with the force carried, as the
// cpu backend runs it (bench/rattle_peers.py's cases).
template <class S>
void count_rattle(const char* label, const S& system, double h, int steps, bool last) {
  const S sys = read_at_run_time(system);
  CounterRng rng(1, 0);
  PhaseState<S> s;
  s.q = variable(sys.thermal_configuration(rng, 1.0));
  for (int c = 0; c < S::dof; ++c) s.p[c] = Counted::variable(rng.normal().x);
  if (project_momentum(sys, s.q, s.p) != Status::ok) std::exit(1);
  s.p = variable(s.p);
  s.q_prev = s.q;
  ForceCarry<S> carry;
  const Real dt = Counted::variable(h);
  int it = 0;
  Rattle::step(sys, s, dt, NewtonOptions{}, it, &carry);  // the first step evaluates the start force too
  counting::tally = {};
  it = 0;
  for (int n = 0; n < steps; ++n)
    if (Rattle::step(sys, s, dt, NewtonOptions{}, it, &carry) != Status::ok) std::exit(1);
  report<S>(label, "rattle", h, steps, counting::tally, it, last);
}

// Gauss-Legendre with Stages stages, an ensemble's step (the simplified Newton
// in A's eigenbasis), on the states of configs/heisenberg.json: q = 0,
// p = (1, 0, 0) + N(0, I), several trajectories.
template <int Stages>
void count_gauss_legendre(const char* label, double h, int steps, bool last) {
  Heisenberg sys;
  const int trajectories = 16;
  counting::Tally total;
  long iterations = 0;
  for (int j = 0; j < trajectories; ++j) {
    CounterRng rng(1, j);
    PhaseState<Heisenberg> s;
    s.q = variable(Vec<3>(Vec<3>::Zero()));
    s.p = variable(Vec<3>(1 + rng.normal().x, rng.normal().x, rng.normal().x));
    const Real dt = Counted::variable(h);
    counting::tally = {};
    int it = 0;
    for (int n = 0; n < steps; ++n)
      if (GaussLegendre<Stages>::step(sys, s, dt, NewtonOptions{}, it) != Status::ok) std::exit(1);
    total.add += counting::tally.add, total.mul += counting::tally.mul, total.div += counting::tally.div;
    total.sqrt += counting::tally.sqrt, total.other += counting::tally.other;
    iterations += it;
  }
  report<Heisenberg>(label, Stages == 2 ? "gauss_legendre_2" : "gauss_legendre_3", h, steps * trajectories, total,
                     iterations, last);
}

}  // namespace tether

namespace tether {

// The counter, on what it must count: a dot product of two 3-vectors read at
// run time is 3 multiplications and 2 additions; arithmetic on the code's
// constants is folded.
bool counter_counts() {
  counting::tally = {};
  const Vec<3> a = variable(Vec<3>(Real(1), Real(2), Real(3))), b = variable(Vec<3>(Real(4), Real(5), Real(6)));
  const Real dot = a.dot(b), folded = Real(2) * Real(3) + Real(1);
  const counting::Tally t = counting::tally;
  counting::tally = {};
  return dot.x == 32 && folded.x == 7 && t.mul == 3 && t.add == 2 && t.div == 0 && t.sqrt == 0 && t.other == 0;
}

}  // namespace tether

int main(int argc, char** argv) {
  using namespace tether;
  if (!counter_counts()) {
    std::fprintf(stderr, "tether_count_flops: the counting scalar miscounts a dot product\n");
    return 1;
  }
  const int steps = argc > 1 ? std::atoi(argv[1]) : 1000;
  if (steps <= 0) {
    std::fprintf(stderr, "tether_count_flops: steps must be a positive integer\n");
    return 2;
  }
  // The systems of bench/rattle_peers.py (configs/chain16.json with 8 and 16 beads).
  Chain<16> c16;
  c16.prm.bend_stiffness = 60;
  c16.prm.bend_angle = 112.0 * 3.14159265358979323846 / 180;
  const double torsion[6] = {1.116, 1.462, -1.578, -0.368, 3.156, -3.788};
  for (int k = 0; k < 6; ++k) c16.prm.torsion[k] = torsion[k];
  c16.prm.has_torsion = true;
  Chain<8> c8;
  c8.prm = c16.prm;
  std::printf("{\"cases\": [\n");
  count_rattle("spherical_pendulum", SphericalPendulum{}, 0.01, steps, false);
  count_rattle("chain8", c8, 0.002, steps, false);
  count_rattle("chain16", c16, 0.002, steps, false);
  // The other RATTLE systems of the run engine's GPU threads (configs/double_pendulum.json, four_bar.json).
  count_rattle("double_pendulum", DoublePendulum{}, 0.005, steps, false);
  count_rattle("four_bar", FourBar{}, 0.002, steps, false);
  // configs/heisenberg.json's dt.
  count_gauss_legendre<2>("heisenberg", 0.05, steps, false);
  count_gauss_legendre<3>("heisenberg", 0.05, steps, true);
  std::printf("]}\n");
}
