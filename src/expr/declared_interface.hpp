#pragma once
// The interface of every system type DeclaredSystem::source generates (here
// with two coordinates and one constraint), without bodies: the registry asks
// which methods pair with it (MethodFor) to know which methods a declared
// system takes before compiling one. tests/expr/test_declared_system.cpp
// compiles a generated type and checks it pairs with exactly these methods.
#include "tether/core/parameters.hpp"
#include "tether/core/small_solve.hpp"
#include "tether/systems/generalized_hamiltonian.hpp"

namespace tether {

struct DeclaredInterface {
  static constexpr const char* name = "declared";
  static constexpr const char* description = "a system declared in a config";
  static constexpr const char* citation = "declared by its user";
  static constexpr int dof = 2;
  static constexpr int constraint_count = 1;
  using Gram = DenseMatrix<1>;
  using Parameters = NoParameters;
  Parameters prm;

  Real potential(const Vec<2>& q) const;
  Vec<2> potential_gradient(const Vec<2>& q) const;
  Vec<1> constraints(const Vec<2>& q) const;
  Mat<1, 2> jacobian(const Vec<2>& q) const;
  Vec<1> constraint_jacobian_times(const Vec<2>& q, const Vec<2>& v) const;
  Vec<2> constraint_transpose_times(const Vec<2>& q, const Vec<1>& lambda) const;
  Gram gram(const Vec<2>& qa, const Vec<2>& qb) const;
  static Vec<2> mass();
  static Vec<2> inverse_mass();
  Vec<2> mass_times(const Vec<2>& v) const;
  Vec<2> inverse_mass_times(const Vec<2>& p) const;
  Vec<2> sqrt_mass_times(const Vec<2>& v) const;
  Real length_scale() const;
  Real energy_scale() const;
};

// A system declared by its frame (index-1, canonical form): three coordinates, two fields.
struct DeclaredFrameInterface {
  static constexpr const char* name = "declared_frame";
  static constexpr const char* description = "a system declared in a config";
  static constexpr const char* citation = "declared by its user";
  static constexpr Form form = Form::canonical;
  static constexpr int dof = 3;
  static constexpr int multiplier_count = 0;
  static constexpr int frame_size = 2;
  using Parameters = NoParameters;
  Parameters prm;
  template <class T>
  void frame(const Arr<T, 3>& q, T (&x)[2][3]) const;
  template <class T>
  T potential(const Arr<T, 3>& q) const;
};

}  // namespace tether
