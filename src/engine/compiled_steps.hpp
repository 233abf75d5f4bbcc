#pragma once
// Every registry pair's CompiledStep (engine/compiled_step.hpp) is compiled in
// the generated unit of its method's header; a unit that includes this one
// links to those instead of compiling them again. The generated units do not
// include it: it includes every method's header, and a unit that did would be
// rebuilt whenever any method changed.
#include "engine/compiled_step.hpp"
#include "system_indices.hpp"  // generated: TETHER_FOR_EACH_PAIR
#include "tether/registry.hpp"

#define TETHER_EXTERN_COMPILED_STEP(I, J) \
  extern template struct tether::CompiledStep<tether::SystemAt<I>, tether::MethodAt<J>>;
TETHER_FOR_EACH_PAIR(TETHER_EXTERN_COMPILED_STEP)
#undef TETHER_EXTERN_COMPILED_STEP
