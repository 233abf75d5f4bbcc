#pragma once
// Helpers for writing a method's discrete equations as one residual R(x) = 0
// in the unknowns x = (q1, p1, lambda, lambda~), the form the reference
// backend solves with a generic dense Newton.
#include <Eigen/Dense>
#include <type_traits>

#include "tether/core/types.hpp"

namespace tether {

template <class System>
struct ResidualLayout {
  static constexpr int n = System::dof, k = System::constraint_count;
  static constexpr int size = 2 * n + 2 * k;
  using X = Eigen::VectorXd;
  static Vec<n> q1(const X& x) { return x.template segment<n>(0); }
  static Vec<n> p1(const X& x) { return x.template segment<n>(n); }
  static Vec<k> lambda(const X& x) { return x.template segment<k>(2 * n); }
  static Vec<k> lambda_end(const X& x) { return x.template segment<k>(2 * n + k); }
  static X pack(const Vec<n>& q1, const Vec<n>& p1) {
    X x = X::Zero(size);
    x.template segment<n>(0) = q1;
    x.template segment<n>(n) = p1;
    return x;
  }
};

// Methods whose unknowns do not fit this layout (stage values, Lie algebra
// elements) declare `static constexpr bool own_unknowns = true` and give
// their own reference_guess, residual and reference_finish, as the index-1
// methods do.
template <class M, class = void>
struct own_unknowns_t : std::false_type {};
template <class M>
struct own_unknowns_t<M, std::void_t<decltype(M::own_unknowns)>> : std::bool_constant<M::own_unknowns> {};
template <class M>
constexpr bool own_unknowns = own_unknowns_t<M>::value;

}  // namespace tether
