#include <Eigen/Dense>

#include "backends/reference/reference_backend.hpp"

namespace tether {

void DynamicLU::compute(const Eigen::MatrixXd& a) { lu_.compute(a); }

Eigen::VectorXd DynamicLU::solve(const Eigen::VectorXd& b) const { return lu_.solve(b); }

}  // namespace tether
