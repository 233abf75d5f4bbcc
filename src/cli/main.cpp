// The `tether` command: run, shoot, validate, list.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "config/config.hpp"
#include "engine/engine.hpp"
#include "engine/registry.hpp"
#include "io/output.hpp"

namespace {

constexpr int exit_bad_input = 2;
constexpr int exit_runtime_error = 1;

// Progress on stderr, at most every two seconds, only for runs long enough to need it.
class Progress {
 public:
  explicit Progress(bool quiet, const char* unit = "trajectory-steps")
      : quiet_(quiet), tty_(isatty(2) != 0), unit_(unit), start_(clock::now()), last_(start_) {}
  void operator()(double done, double total) {
    if (quiet_) return;
    const auto now = clock::now();
    // A terminal gets one line redrawn every 2 s; a log file a line every 30 s.
    if (std::chrono::duration<double>(now - last_).count() < (tty_ ? 2.0 : 30.0) && done < total) return;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    if (elapsed < 1.0) return;
    last_ = now;
    const double rate = done / elapsed;
    std::fprintf(stderr, "%s[tether] %5.1f%%  %.3g %s/s  eta %.0f s%s", tty_ ? "\r" : "", 100.0 * done / total, rate,
                 unit_, rate > 0 ? (total - done) / rate : 0.0, tty_ ? "   " : "\n");
    shown_ = tty_;
  }
  ~Progress() {
    if (shown_) std::fprintf(stderr, "\n");
  }

 private:
  using clock = std::chrono::steady_clock;
  bool quiet_, tty_, shown_ = false;
  const char* unit_;
  clock::time_point start_, last_;
};

// One line of `tether list`: a composition's order depends on its scheme.
template <class M>
void list_method() {
  if constexpr (requires { M::base_name; })
    std::printf("  %-22s base %s; order 4, 6 or 8 by scheme  %s\n", M::name, M::base_name, M::citation);
  else if constexpr (requires { typename M::Retraction; })
    std::printf("  %-22s retraction %s, order %d  %s\n", M::name, M::Retraction::name, M::order, M::citation);
  else if constexpr (requires { M::retraction; })
    std::printf("  %-22s retraction %s, order %d  %s\n", M::name, M::retraction, M::order, M::citation);
  else if constexpr (requires { M::prm; })
    std::printf("  %-22s order %d with the default parameters  %s\n", M::name, M::order, M::citation);
  else
    std::printf("  %-22s order %d  %s\n", M::name, M::order, M::citation);
}

std::string method_label(const tether::RunConfig& c) { return tether::describe_method(c); }

int do_run(const std::string& config_path, const std::string& out, const std::string& backend, long threads,
           long batch_size, bool quiet) {
  if (tether::is_shoot_config_file(config_path))
    throw tether::ConfigError("shoot", "this is a shooting config: run it with `tether shoot " + config_path + " --out DIR`");
  tether::RunConfig cfg = tether::load_config_file(config_path);
  if (!backend.empty()) cfg.backend = backend;
  if (batch_size > 0) cfg.batch_size = batch_size;
#ifdef _OPENMP
  if (threads > 0) omp_set_num_threads(int(threads));
#endif
  tether::check_config(cfg);
  cfg.backend = tether::resolve_backend(cfg.backend);

  tether::OutputFolder folder(out);
  std::unique_ptr<tether::CsvFinalStates> finals;
  if (cfg.write_final_states)
    finals = std::make_unique<tether::CsvFinalStates>(folder.partial("final.csv"), tether::system_dof(cfg.system));
  tether::RunOptions opt;
  opt.final_states = finals.get();
  Progress progress(quiet);
  opt.progress = [&](double d, double t) { progress(d, t); };
  const tether::RunResult r = tether::run(cfg, opt);
  if (finals) {
    finals->close();
    folder.commit("final.csv");
  }
  tether::write_timeseries(folder.partial("timeseries.csv"), r);
  folder.commit("timeseries.csv");
  tether::write_summary(folder.partial("summary.json"), cfg, r);
  folder.commit("summary.json");

  if (!quiet) {
    const std::string method = method_label(cfg);
    std::printf("%s / %s on %s: %lld trajectories x %lld steps in %.3g s (%.3g trajectory-steps/s)\n", r.system.c_str(),
                method.c_str(), r.backend.c_str(), (long long)r.trajectories, (long long)r.steps, r.wall_seconds,
                r.integration_seconds > 0 ? double(r.trajectory_steps) / r.integration_seconds : 0.0);
    if (r.family == "nonholonomic")
      std::printf("  max |g_i(q) . qdot| %.3g", r.max_velocity_constraint_violation);
    else
      std::printf("  max |g(q)| %.3g, max |G M^-1 p| %.3g", r.max_constraint_violation,
                  r.max_velocity_constraint_violation);
    std::printf(", max relative energy error %.3g, Newton iterations mean %.3g max %d\n  wrote %s\n",
                r.max_relative_energy_error, r.newton_mean, r.newton_max, folder.dir().string().c_str());
  }
  if (r.failed > 0)
    std::fprintf(stderr, "warning: %lld of %lld trajectories failed (see failures in summary.json)\n",
                 (long long)r.failed, (long long)r.trajectories);
  return 0;
}

int do_shoot(const std::string& config_path, const std::string& out, const std::string& backend, long threads,
             bool quiet) {
  tether::ShootConfig cfg = tether::load_shoot_config_file(config_path);
  if (!backend.empty()) cfg.run.backend = backend;
#ifdef _OPENMP
  if (threads > 0) omp_set_num_threads(int(threads));
#endif
  cfg.run.backend = tether::resolve_backend(cfg.run.backend);
  tether::OutputFolder folder(out);
  Progress progress(quiet, "shots");
  tether::ShootOptions opt;
  opt.progress = [&](double d, double t) { progress(d, t); };
  const tether::ShootResult r = tether::shoot(cfg, opt);
  tether::write_shots(folder.partial("shots.csv"), r);
  folder.commit("shots.csv");
  if (cfg.shoot.geodesic_every > 0) {
    tether::write_geodesics(folder.partial("geodesics.csv"), r);
    folder.commit("geodesics.csv");
  }
  tether::write_shoot_summary(folder.partial("summary.json"), cfg, r);
  folder.commit("summary.json");

  std::int64_t converged = 0;
  for (const auto& t : r.targets) converged += t.status == tether::ShotStatus::converged;
  if (!quiet)
    std::printf("%s / %s on %s: %lld of %lld targets converged, %lld shots in %.3g s (%.3g shots/s)\n  wrote %s\n",
                r.system.c_str(), method_label(cfg.run).c_str(), r.backend.c_str(), (long long)converged,
                (long long)r.targets.size(), (long long)r.shots, r.wall_seconds,
                r.shooting_seconds > 0 ? double(r.shots) / r.shooting_seconds : 0.0, folder.dir().string().c_str());
  if (converged < std::int64_t(r.targets.size()))
    std::fprintf(stderr, "warning: %lld of %lld targets did not converge (their rows in shots.csv say why)\n",
                 (long long)(std::int64_t(r.targets.size()) - converged), (long long)r.targets.size());
  return 0;
}

// A config may be meant for another machine: say so, but it is not an error.
void note_backend_here(const std::string& backend) {
  try {
    tether::resolve_backend(backend);
  } catch (const tether::ConfigError& e) {
    std::printf("note: on this machine, %s\n", e.what());
  }
}

int do_validate(const std::string& path) {
  if (tether::is_shoot_config_file(path)) {
    const tether::ShootConfig cfg = tether::load_shoot_config_file(path);
    std::printf("%s: ok (shoot: %s, %s, %zu targets x %lld guesses, T %g in %lld steps, backend %s)\n", path.c_str(),
                cfg.run.system_name.c_str(), method_label(cfg.run).c_str(), cfg.shoot.targets.size(),
                (long long)cfg.shoot.guesses_per_target(), cfg.shoot.time, (long long)cfg.run.steps,
                cfg.run.backend.c_str());
    note_backend_here(cfg.run.backend);
    return 0;
  }
  const tether::RunConfig cfg = tether::load_config_file(path);
  tether::check_config(cfg);
  const std::string method = method_label(cfg);
  std::printf("%s: ok (%s, %s, %lld trajectories x %lld steps of dt %g, backend %s)\n", path.c_str(),
              cfg.system_name.c_str(), method.c_str(), (long long)cfg.size, (long long)cfg.steps, cfg.dt,
              cfg.backend.c_str());
  note_backend_here(cfg.backend);
  return 0;
}

void do_list() {
  std::printf("systems:\n");
  std::printf("  %-22s q in R^%d, %d constraint\n", "spherical_pendulum", tether::SphericalPendulum::dof,
              tether::SphericalPendulum::constraint_count);
  std::printf("  %-22s q in R^%d, %d constraints\n", "double_pendulum", tether::DoublePendulum::dof,
              tether::DoublePendulum::constraint_count);
  std::string sizes;
  for (int n : tether::chain_sizes()) sizes += (sizes.empty() ? "" : ", ") + std::to_string(n);
  std::printf("  %-22s N beads in R^3, N-1 bonds; N in {%s}\n", "chain", sizes.c_str());
  std::printf("  %-22s planar Kepler problem, no constraints; mass, mu\n", "kepler");
  std::printf("  %-22s free rigid body, R in R^3x3 with R^T R = I, and its centre; inertia, mass, gravity\n",
              "rigid_body");
  std::printf("  %-22s rigid links joined by spherical joints, the first pinned; links in {1, 2}\n", "rigid_chain");
  std::printf("  %-22s lagrangian: charge on S^2, m(q) = m (1 + kappa z^2), field b e_z (seed 002)\n",
              "magnetic_sphere");
  std::printf("  %-22s nonholonomic: Heisenberg frame, canonical H (issue 3)\n", "heisenberg");
  std::printf("  %-22s nonholonomic: seed 001 §6, L = |qdot|^2/2, g = (-y, x, 1)\n", "heisenberg_vakonomic");
  std::printf("  %-22s nonholonomic: seed 004 eq. (42), canonical H; parameter beta\n", "martinet");
  std::printf("  %-22s nonholonomic: Martinet as a Lagrangian, zdot = (y^2/2) xdot; parameter beta\n",
              "martinet_lagrangian");
  std::printf("  %-22s nonholonomic: seed 001 §5, q = (x, y, theta, phi); length, alpha, beta, potential\n",
              "parallel_parking");
  std::printf("  %-22s holonomic + nonholonomic: S^3 in R^4 with <iq, qdot> = 0 (seed 001 Prop 6)\n",
              "sphere_contact");
  std::printf("methods for holonomic systems:\n");
#define TETHER_LIST_METHOD(S, M) list_method<M>();
  TETHER_FOR_EACH_HOLONOMIC_METHOD(TETHER_LIST_METHOD, void)
  std::printf("  for rigid_body and rigid_chain also:\n");
  TETHER_FOR_EACH_RIGID_METHOD(TETHER_LIST_METHOD, void)
  std::printf("  for systems without constraints (kepler) also:\n");
  TETHER_FOR_EACH_UNCONSTRAINED_METHOD(TETHER_LIST_METHOD, void)
  std::printf("  for spherical_pendulum (T*S^2) also:\n");
  TETHER_FOR_EACH_SPHERE_METHOD(TETHER_LIST_METHOD, void)
  std::printf("methods for lagrangian systems:\n");
  TETHER_FOR_EACH_LAGRANGIAN_METHOD(TETHER_LIST_METHOD, void)
#undef TETHER_LIST_METHOD
  std::printf("methods for nonholonomic (index-1) systems:\n");
#define TETHER_LIST_METHOD(S, M)                                                                         \
  if (M::stages > 0)                                                                                     \
    std::printf("  %-22s stages %d, order %d  %s\n", M::name, M::stages, M::order, M::citation); \
  else                                                                                                   \
    std::printf("  %-22s order %d  %s\n", M::name, M::order, M::citation);
  TETHER_FOR_EACH_NONHOLONOMIC_METHOD(TETHER_LIST_METHOD, void)
  std::printf("methods for holonomic + nonholonomic systems:\n");
  TETHER_FOR_EACH_MIXED_METHOD(TETHER_LIST_METHOD, void)
#undef TETHER_LIST_METHOD
  std::printf("backends:\n  %-22s cuda when a device is present, else cpu (the default)\n", "auto");
  std::printf("  %-22s serial generic dense Newton on each method's residual\n", "reference");
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  std::printf("  %-22s the GPU step code on %d threads\n", "cpu", threads);
  if (!tether::cuda_built())
    std::printf("  %-22s not built (no nvcc at configure time)\n", "cuda");
  else
    std::printf("  %-22s built; %d device(s) present\n", "cuda", tether::cuda_device_count());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tether: ensembles of constrained mechanical trajectories, integrated by structure-preserving methods"};
  app.require_subcommand(1);

  std::string config, out, backend;
  long threads = 0, batch = 0;
  bool quiet = false;
  auto* run = app.add_subcommand("run", "integrate the ensemble a config describes");
  run->add_option("config", config, "config file (JSON)")->required();
  run->add_option("--out", out, "output folder")->required();
  run->add_option("--backend", backend, "auto, cpu, reference or cuda (overrides the config)");
  run->add_option("--threads", threads, "cpu threads (default: all cores)")->check(CLI::Range(1L, 1024L));
  run->add_option("--batch-size", batch, "trajectories per batch (overrides the config)")
      ->check(CLI::Range(1L, 1L << 30));
  run->add_flag("--quiet", quiet, "no progress or report on the terminal");

  std::string sconfig, sout, sbackend;
  long sthreads = 0;
  bool squiet = false;
  auto* shoot = app.add_subcommand("shoot", "solve q(0) = q0, q(T) = q1 for p0, for every target a config lists");
  shoot->add_option("config", sconfig, "shooting config (JSON)")->required();
  shoot->add_option("--out", sout, "output folder")->required();
  shoot->add_option("--backend", sbackend, "auto, cpu, reference or cuda (overrides the config)");
  shoot->add_option("--threads", sthreads, "cpu threads (default: all cores)")->check(CLI::Range(1L, 1024L));
  shoot->add_flag("--quiet", squiet, "no progress or report on the terminal");

  std::string vconfig;
  auto* validate = app.add_subcommand("validate", "check a config and say what is wrong and where");
  validate->add_option("config", vconfig, "config file (JSON)")->required();

  auto* list = app.add_subcommand("list", "systems, methods and backends in this build");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : exit_bad_input;
  }

  try {
    if (*run) return do_run(config, out, backend, threads, batch, quiet);
    if (*shoot) return do_shoot(sconfig, sout, sbackend, sthreads, squiet);
    if (*validate) return do_validate(vconfig);
    if (*list) do_list();
    return 0;
  } catch (const tether::ConfigError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return exit_bad_input;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return exit_runtime_error;
  }
}
