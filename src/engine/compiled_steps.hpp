#pragma once
// Every registry pair's CompiledStep (engine/compiled_step.hpp) is compiled in
// the generated unit of its method's header. A unit that steps a method
// through CompiledFlow includes the generated compiled_steps_<header>.hpp of
// that method's header, which includes the header and this one and declares
// its pairs extern with every system: the unit then links to those steps
// instead of compiling them again, and depends on that method's header alone
// (a unit that declared every pair would include every method's header and be
// rebuilt whenever any method changed).
#include "engine/compiled_step.hpp"
#include "tether/system_list.hpp"

#define TETHER_EXTERN_COMPILED_STEP(I, M) \
  extern template struct tether::CompiledStep<::tether::SystemAt<I>, ::tether::M>;
