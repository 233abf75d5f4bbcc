#pragma once
// A declared system (expr/declared_system.hpp) with one method, compiled
// when first used into a shared library that the engine calls as it calls a
// built-in pair. The library is built with the compiler and flags this build
// used (generated/declared_toolchain.hpp) and kept in a cache folder
// ($TETHER_CACHE_DIR, else $XDG_CACHE_HOME/tether, else ~/.cache/tether),
// keyed by a hash of everything it was built from: the generated source, the
// compiler and its flags, and the headers it was compiled against (each by
// path, size and time), which declare the engine symbols it calls in the
// binary that loads it (the tether command exports them): the command and
// the Python module of one build share it. A second run loads it without
// compiling. An entry whose library fails its seal or does
// not load is rebuilt; runs that compile the same pair at once take turns on
// the entry's lock, so it is compiled once.
#include <string>
#include <vector>

#include "engine/pair_entry.hpp"
#include "expr/declared_system.hpp"

namespace tether {

// The engine a pair's library holds: each is compiled when first used, so
// that `tether run` does not wait for the sampler's code (a third of a RATTLE
// pair's compile) and `tether sample` not for the run engine's.
enum class PairEngine { run, shoot, sample };

// What the library compiled for one (declared system, method, engine) exports:
// the entry point of its engine (the others null) and, for run, the check
// of explicit states (engine/pair_entry.hpp's check_system).
struct DeclaredPair {
  PairEntry entry;
  void (*check)(const RunConfig&) = nullptr;
};

// The pair's library for `backend` (resolved: cpu, reference or cuda; the
// cuda one also holds the engine's kernels, in a build that runs them):
// loaded from the cache, or compiled first. Errors are ConfigErrors at
// system.declare: no compiler, a compiler failure (the generated source and
// the compiler's messages are kept; the message says where), a library that
// does not load.
const DeclaredPair& declared_pair(const DeclaredSystem& d, int method, PairEngine engine, const std::string& backend);

// The source compiled for the pair (`tether` keeps it beside the library).
std::string declared_pair_source(const DeclaredSystem& d, int method, PairEngine engine);

// The CUDA unit of the engine's kernels for the pair (backends/cuda/
// instantiate_pair.cuh), and nvcc's arguments for it but the output and the
// source, as this build compiles its own kernels (generated/
// declared_toolchain.hpp; none without CUDA). A build that runs cuda links
// it into the pair's cuda library; the tests compile it to PTX, so that a
// declared type that is not device code fails where no GPU is.
std::string declared_pair_cuda_source(const DeclaredSystem& d, int method, PairEngine engine);
std::vector<std::string> declared_cuda_compile_flags(const std::string& host_path);

// The compiler's arguments but the output and the source, for the engine in
// the binary at `host_path`: tether's headers are the copy installed beside
// that binary (CMakeLists.txt, tether_install_compile_tree), else those of
// the build folder it was built in. A ConfigError when there are neither.
std::vector<std::string> declared_compile_flags(const std::string& host_path);

}  // namespace tether
