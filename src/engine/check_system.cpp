// Each registered system's initial-state functions, instantiated here once
// (the per-method units declare them extern: engine/initial_state_extern.hpp), and
// the check of a config's explicit initial states.
#include <array>

#include "engine/initial_state.hpp"
#include "engine/pair_entry.hpp"
#include "registry/parameter_io.hpp"
#include "system_indices.hpp"
#include "tether/system_list.hpp"

#define TETHER_DEFINE_INITIAL_STATES(I) TETHER_INITIAL_STATES(, I)
TETHER_FOR_EACH_SYSTEM(TETHER_DEFINE_INITIAL_STATES)

namespace tether {

namespace {

template <class S>
void check_one(const RunConfig& c) {
  check_initial_states(configured<S>(c.system_parameters, "system.parameters"), c);
}

template <class... S>
void check_in(TypeList<S...>, const RunConfig& c) {
  static constexpr std::array<void (*)(const RunConfig&), sizeof...(S)> table{&check_one<S>...};
  table.at(std::size_t(c.system))(c);
}

}  // namespace

void check_system(const RunConfig& c) { check_in(Systems{}, c); }

}  // namespace tether
