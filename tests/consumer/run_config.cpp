// A config run through the engine's one public header.
#include <cstdio>
#include <tether/engine.hpp>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const tether::RunResult r = tether::run(tether::load_config_file(argv[1]), {});
  std::printf("%s with %s: %lld trajectories, max |g| %.1e\n", r.system.c_str(), r.method.c_str(),
              static_cast<long long>(r.trajectories), r.max_constraint_violation);
  return r.failed == 0 ? 0 : 1;
}
