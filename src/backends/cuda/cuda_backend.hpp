#pragma once
// The cuda backend's entry points, compiled by nvcc: CMake generates one
// unit per registered system (cuda_system_<i>.cu) that instantiates these
// for it, with every method that pairs with it (instantiate.cuh).
#include <tuple>
#include <type_traits>
#include <variant>

#include "backends/backend.hpp"
#include "backends/chain_runner.hpp"
#include "backends/shot_runner.hpp"
#include "tether/registry.hpp"

namespace tether {

// The methods that pair with S, as one variant type: it carries the
// configured method (and its parameters) to the unit that has its kernels.
template <class S, class List>
struct PairedMethods;
template <class S, class... M>
struct PairedMethods<S, TypeList<M...>> {
  using tuple = decltype(std::tuple_cat(std::declval<std::conditional_t<MethodFor<M, S>, std::tuple<M>, std::tuple<>>>()...));
};
template <class Tuple>
struct VariantOf;
template <class... M>
struct VariantOf<std::tuple<M...>> {
  using type = std::variant<M...>;
};
template <class S>
using PairedMethod = typename VariantOf<typename PairedMethods<S, Methods>::tuple>::type;

template <class S>
std::unique_ptr<Backend> make_cuda_backend(const S& sys, const PairedMethod<S>& method, const StepControl& ctl);
// Index-1 systems only (others throw): the shooting kernels.
template <class S>
std::unique_ptr<ShotRunner> make_cuda_shot_runner(const S& sys, const PairedMethod<S>& method, const ShootControl& ctl);
// Monte Carlo chains, with the methods that can run them (others throw).
template <class S>
std::unique_ptr<ChainRunner> make_cuda_chain_runner(const S& sys, const PairedMethod<S>& method, const HmcControl& ctl);

}  // namespace tether
