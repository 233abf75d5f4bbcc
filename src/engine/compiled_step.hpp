#pragma once
// The steps of the shooting methods, compiled once. A method's step is an
// inline template: every unit that calls it compiles it again, and GCC does so
// even where an explicit instantiation declaration (extern template) says
// another unit holds it. CompiledStep<S, M> holds M's step on S with the two
// tangents that shooting integrates, as out-of-line functions; the generated
// unit of M's header instantiates it for every pair (TETHER_INSTANTIATE_PAIR),
// and the generated compiled_steps_<header>.hpp tells every other unit not
// to (engine/compiled_steps.hpp). CompiledFlow<M> is the shooting flow that
// calls them: the tests step with it (test_shoot_tangent.cpp compiled in
// 118 s with the steps inline, 47 s so).
#include "tether/core/families.hpp"
#include "tether/shooting/shoot.hpp"

namespace tether {

template <class S, class M>
inline constexpr bool compiled_step_pair = MethodFor<M, S> && Index1System<S>;

// A pair that does not shoot: nothing compiled.
template <class S, class M, bool = compiled_step_pair<S, M>>
struct CompiledStep {};

// The tangent has S::dof columns (d(q, p)/dp0 of single shooting) or
// S::dof + 1 (the [A | b] of multiple shooting's arcs); null for none.
template <class S, class M>
struct CompiledStep<S, M, true> {
  using Carry = typename M::template Carry<S>;
  static Status step(const S& sys, PhaseState<S>& s, Real h, const NewtonOptions& opt, int& iterations,
                     Tangent<S, S::dof>* tangent, Carry* carry);
  static Status step(const S& sys, PhaseState<S>& s, Real h, const NewtonOptions& opt, int& iterations,
                     Tangent<S, S::dof + 1>* tangent, Carry* carry);
};

template <class S, class M>
Status CompiledStep<S, M, true>::step(const S& sys, PhaseState<S>& s, Real h, const NewtonOptions& opt,
                                      int& iterations, Tangent<S, S::dof>* tangent, Carry* carry) {
  return M::step(sys, s, h, opt, iterations, tangent, carry);
}

template <class S, class M>
Status CompiledStep<S, M, true>::step(const S& sys, PhaseState<S>& s, Real h, const NewtonOptions& opt,
                                      int& iterations, Tangent<S, S::dof + 1>* tangent, Carry* carry) {
  return M::step(sys, s, h, opt, iterations, tangent, carry);
}

// MethodFlow<M> with the compiled steps where CompiledStep has them (other
// pairs and tangent widths: M's inline step). Without a tangent it takes
// S::dof columns, null; without a carry it steps from a fresh one. With M's
// name and start it also steps wherever M itself would (the tests' integrate).
template <class M>
struct CompiledFlow : MethodFlow<M> {
  static constexpr const char* name = M::name;
  template <class S>
  static void start(const S& sys, PhaseState<S>& s, Real h) {
    M::start(sys, s, h);
  }
  template <class S, int C = S::dof>
  static Status step(const S& sys, PhaseState<S>& s, Real h, const NewtonOptions& opt, int& iterations,
                     Tangent<S, C>* tangent = nullptr, typename MethodFlow<M>::template Carry<S>* carry = nullptr) {
    if (carry == nullptr) {
      typename MethodFlow<M>::template Carry<S> fresh;
      return step(sys, s, h, opt, iterations, tangent, &fresh);
    }
    if constexpr (compiled_step_pair<S, M> && (C == S::dof || C == S::dof + 1))
      return CompiledStep<S, M>::step(sys, s, h, opt, iterations, tangent, carry);
    else
      return M::step(sys, s, h, opt, iterations, tangent, carry);
  }
};

}  // namespace tether
