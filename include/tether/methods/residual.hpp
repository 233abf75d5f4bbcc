#pragma once
// Helpers for writing a method's discrete equations as one residual R(x) = 0
// in the unknowns x = (q1, p1, lambda, lambda~), the form the reference
// backend solves with a generic dense Newton.
#include <Eigen/Dense>

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

}  // namespace tether
