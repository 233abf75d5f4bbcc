// tether_count_flops: the floating-point operations of one RATTLE step, counted
// exactly by running the step code (written for any scalar, core/lanes.hpp)
// with a scalar that counts what is done to it. For the roofline figure of
// bench/README.md: flops per step times trajectory-steps per second, against
// the machine's FP64 peak.
//
//     tether_count_flops [steps]      # prints one JSON document
//
// Counted as executed, Newton iterations included (their number per step is
// printed too): one flop per add, subtract, multiply, divide and square
// root, none for negations, comparisons and copies.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "tether/core/lanes.hpp"
#include "tether/core/random.hpp"
#include "tether/methods/rattle.hpp"
#include "tether/systems/chain.hpp"
#include "tether/systems/spherical_pendulum.hpp"

namespace tether {
namespace counting {

struct Tally {
  std::uint64_t add = 0, mul = 0, div = 0, sqrt = 0;
};
inline Tally tally;

struct Counted {
  Real x;
  Counted() = default;
  Counted(Real v) : x(v) {}
};

#define TETHER_COUNT_OP(op, field)                                                                 \
  inline Counted operator op(Counted a, Counted b) { return ++tally.field, Counted(a.x op b.x); }   \
  inline Counted operator op(Counted a, Real b) { return ++tally.field, Counted(a.x op b); }        \
  inline Counted operator op(Real a, Counted b) { return ++tally.field, Counted(a op b.x); }        \
  inline Counted& operator op##=(Counted& a, Counted b) { return ++tally.field, a.x op## = b.x, a; }
TETHER_COUNT_OP(+, add)
TETHER_COUNT_OP(-, add)
TETHER_COUNT_OP(*, mul)
TETHER_COUNT_OP(/, div)
#undef TETHER_COUNT_OP
inline Counted operator-(Counted a) { return Counted(-a.x); }
inline bool operator<(Counted a, Counted b) { return a.x < b.x; }
inline bool operator<=(Counted a, Counted b) { return a.x <= b.x; }
inline bool operator>(Counted a, Counted b) { return a.x > b.x; }
inline bool operator==(Counted a, Counted b) { return a.x == b.x; }
inline bool operator!=(Counted a, Counted b) { return a.x != b.x; }
inline bool operator<(Counted a, Real b) { return a.x < b; }
inline bool operator==(Counted a, Real b) { return a.x == b; }
inline Counted sqrt(Counted a) { return ++tally.sqrt, Counted(std::sqrt(a.x)); }
inline Counted fabs(Counted a) { return Counted(std::fabs(a.x)); }
inline Counted abs(Counted a) { return fabs(a); }

// The one-lane spellings of core/lanes.hpp for Counted (here, where
// argument-dependent lookup finds them from the step templates).
inline bool is_finite(Counted a) { return tether::is_finite(a.x); }
inline Counted select(bool m, Counted a, Counted b) { return m ? a : b; }
template <int N>
bool all_finite(const Vec<N, Counted>& v) {
  for (int i = 0; i < N; ++i)
    if (!is_finite(v[i])) return false;
  return true;
}
template <int N>
Counted max_abs(const Vec<N, Counted>& v) {
  Real m = 0;
  for (int i = 0; i < N; ++i) m = std::fmax(m, std::fabs(v[i].x));
  return Counted(m);
}

}  // namespace counting

using counting::Counted;

}  // namespace tether

namespace Eigen {
template <>
struct NumTraits<tether::Counted> : GenericNumTraits<double> {
  using Real = tether::Counted;
  using NonInteger = tether::Counted;
  using Nested = tether::Counted;
  using Literal = tether::Counted;
  enum { IsComplex = 0, IsInteger = 0, IsSigned = 1, RequireInitialization = 0, ReadCost = 1, AddCost = 1, MulCost = 1 };
};
template <typename Op>
struct ScalarBinaryOpTraits<tether::Counted, double, Op> {
  using ReturnType = tether::Counted;
};
template <typename Op>
struct ScalarBinaryOpTraits<double, tether::Counted, Op> {
  using ReturnType = tether::Counted;
};
}  // namespace Eigen

namespace tether {

// Steps one thermal trajectory of S (Real state drawn, then counted steps)
// with the force carried, as the cpu backend runs RATTLE.
template <class S>
void count(const char* label, const S& sys, Real h, int steps, bool last) {
  CounterRng rng(1, 0);
  PhaseState<S> start;
  start.q = sys.thermal_configuration(rng, 1.0);
  for (int c = 0; c < S::dof; ++c) start.p[c] = rng.normal();
  if (project_momentum(sys, start.q, start.p) != Status::ok) std::exit(1);
  PhaseState<S, Counted> s;
  for (int c = 0; c < S::dof; ++c) {
    s.q[c] = start.q[c];
    s.p[c] = start.p[c];
  }
  s.q_prev = s.q;
  ForceCarry<S, Counted> carry;
  int it = 0;
  Rattle::step(sys, s, h, NewtonOptions{}, it, &carry);  // the first step evaluates the start force too
  counting::tally = {};
  it = 0;
  for (int n = 0; n < steps; ++n)
    if (Rattle::step(sys, s, h, NewtonOptions{}, it, &carry) != Status::ok) std::exit(1);
  const counting::Tally& t = counting::tally;
  const double per = 1.0 / steps;
  std::printf("    {\"case\": \"%s\", \"method\": \"rattle\", \"dt\": %g, \"steps\": %d, \"newton_iterations_per_step\": %.3f,\n"
              "     \"per_step\": {\"add\": %.1f, \"mul\": %.1f, \"div\": %.1f, \"sqrt\": %.1f, \"flops\": %.1f}}%s\n",
              label, h, steps, it * per, t.add * per, t.mul * per, t.div * per, t.sqrt * per,
              (t.add + t.mul + t.div + t.sqrt) * per, last ? "" : ",");
}

}  // namespace tether

int main(int argc, char** argv) {
  using namespace tether;
  const int steps = argc > 1 ? std::atoi(argv[1]) : 1000;
  if (steps <= 0) {
    std::fprintf(stderr, "tether_count_flops: steps must be a positive integer\n");
    return 2;
  }
  // The systems of bench/rattle_peers.py (configs/chain16.json with 8 and 16 beads).
  Chain<16> c16;
  c16.prm.bend_stiffness = 60;
  c16.prm.bend_angle = 112.0 * 3.14159265358979323846 / 180;
  const Real torsion[6] = {1.116, 1.462, -1.578, -0.368, 3.156, -3.788};
  for (int k = 0; k < 6; ++k) c16.prm.torsion[k] = torsion[k];
  c16.prm.has_torsion = true;
  Chain<8> c8;
  c8.prm = c16.prm;
  std::printf("{\"cases\": [\n");
  count("spherical_pendulum", SphericalPendulum{}, 0.01, steps, false);
  count("chain8", c8, 0.002, steps, false);
  count("chain16", c16, 0.002, steps, true);
  std::printf("]}\n");
}
