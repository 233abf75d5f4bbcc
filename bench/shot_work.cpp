// tether_shot_work: how long a GPU's shooting launches would last, counted on
// the host. A cuda launch runs every shot of a batch in a thread of its own
// and lasts as long as its slowest shot, so its length is the most steps one
// shot integrates, not their mean. This runs `tether shoot`'s host loop
// (solve_targets: every pass, continuation round and batch as cuda takes
// them) with a shot runner that counts each shot's steps, with and without
// the tangent, and reports per launch the mean and the largest shot's work.
//
//     tether_shot_work config.json        # a shoot config; prints one JSON document
//
// Work is in steps with the tangent; a step without it counts --without
// (default 0.43: GL3 on Heisenberg, 0.75 us against 1.75 us, bench/README.md).
// Heisenberg with Gauss-Legendre (1-3 stages) only: the systems of the
// shooting peers (bench/shoot_peers.py).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "engine/shoot_ensemble.hpp"
#include "tether/engine/config.hpp"
#include "tether/methods/gauss_legendre.hpp"
#include "tether/systems/heisenberg.hpp"

namespace tether {
namespace {

struct StepCount {
  long with_tangent = 0, without = 0;
};
StepCount counted;  // the shot being run's (one shot at a time)

template <class M>
struct CountingFlow : MethodFlow<M> {
  template <class S, int C>
  static Status step(const S& sys, PhaseState<S>& s, Real h, const NewtonOptions& opt, int& iterations,
                     Tangent<S, C>* tangent, typename MethodFlow<M>::template Carry<S>* carry = nullptr) {
    ++(tangent ? counted.with_tangent : counted.without);
    return M::step(sys, s, h, opt, iterations, tangent, carry);
  }
};

struct Launch {
  std::int64_t steps = 0, shots = 0;
  double mean = 0, most = 0;         // work per shot
  double warps = 0;                  // the mean over warps of 32 consecutive shots of their largest
  std::vector<std::int64_t> status;  // shots by ShotStatus
};

template <class S, class M>
class CountingRunner final : public ShotRunner {
 public:
  CountingRunner(const S& sys, const ShootControl& ctl, double without, std::vector<Launch>& log)
      : sys_(sys), ctl_(ctl), without_(without), log_(log) {}
  void run(HostShots& h) override {
    const ShotView v = h.view();
    Launch l;
    l.steps = ctl_.steps;
    l.shots = h.count;
    l.status.assign(shot_status_count, 0);
    std::vector<double> work(std::size_t(h.count));
    for (std::int64_t i = 0; i < h.count; ++i) {
      counted = {};
      if (shooting_kind(ctl_) == Shooting::multiple)
        shoot_trajectory<S, CountingFlow<M>, Shooting::multiple>(sys_, ctl_, v, i);
      else
        shoot_trajectory<S, CountingFlow<M>, Shooting::single>(sys_, ctl_, v, i);
      work[std::size_t(i)] = double(counted.with_tangent) + without_ * double(counted.without);
      ++l.status[h.status[std::size_t(i)]];
    }
    double sum = 0, warp_sum = 0;
    for (std::size_t i = 0; i < work.size(); i += 32) {
      const auto end = work.begin() + std::ptrdiff_t(std::min(work.size(), i + 32));
      warp_sum += *std::max_element(work.begin() + std::ptrdiff_t(i), end);
    }
    for (double w : work) sum += w, l.most = std::max(l.most, w);
    l.mean = h.count ? sum / double(h.count) : 0;
    l.warps = h.count ? warp_sum / double((h.count + 31) / 32) : 0;
    log_.push_back(l);
  }

 private:
  S sys_;
  ShootControl ctl_;
  double without_;
  std::vector<Launch>& log_;
};

template <int Stages>
ShootResult count(const ShootConfig& cfg, double without, std::vector<Launch>& log) {
  using M = GaussLegendre<Stages>;
  const Heisenberg sys;
  return solve_targets(cfg, "cuda", Heisenberg::dof, M::order, [&](const ShootControl& ctl) {
    return std::unique_ptr<ShotRunner>(new CountingRunner<Heisenberg, M>(sys, ctl, without, log));
  }, ShootOptions{});
}

int main_(int argc, char** argv) {
  CLI::App app{"tether_shot_work: the work of each shooting launch's mean and slowest shot"};
  std::string path;
  double without = 0.43;
  app.add_option("config", path, "a `tether shoot` config (Heisenberg, gauss_legendre)")->required();
  app.add_option("--without", without, "a step without the tangent, in steps with it (default 0.43)");
  CLI11_PARSE(app, argc, argv);
  std::ifstream in(path);
  if (!in) {
    std::cerr << "tether_shot_work: cannot read " << path << "\n";
    return 2;
  }
  std::stringstream text;
  text << in.rdbuf();
  try {
    const ShootConfig cfg = parse_shoot_config(text.str(), path);
    if (cfg.run.system_name != "heisenberg" || cfg.run.method_name != "gauss_legendre")
      throw ConfigError("system.name", "tether_shot_work counts heisenberg with gauss_legendre only, got " +
                                           cfg.run.system_name + " with " + cfg.run.method_name);
    std::vector<Launch> log;
    ShootResult r;
    switch (cfg.run.stages) {
      case 1: r = count<1>(cfg, without, log); break;
      case 2: r = count<2>(cfg, without, log); break;
      case 3: r = count<3>(cfg, without, log); break;
      default: throw ConfigError("method.stages", "tether_shot_work counts 1 to 3 stages");
    }
    nlohmann::ordered_json doc, launches = nlohmann::json::array();
    double total = 0, critical = 0;
    std::vector<std::int64_t> status(shot_status_count, 0);
    for (const Launch& l : log) {
      nlohmann::ordered_json by;
      for (int s = 0; s < shot_status_count; ++s) {
        by[shot_status_name(ShotStatus(s))] = l.status[std::size_t(s)];
        status[std::size_t(s)] += l.status[std::size_t(s)];
      }
      launches.push_back({{"steps", l.steps}, {"shots", l.shots}, {"mean_work", l.mean}, {"slowest_work", l.most},
                          {"mean_warp_work", l.warps}, {"shots_by_status", by}});
      total += l.mean * double(l.shots);
      critical += l.most;
    }
    nlohmann::ordered_json by;
    for (int s = 0; s < shot_status_count; ++s) by[shot_status_name(ShotStatus(s))] = status[std::size_t(s)];
    std::int64_t converged = 0;
    for (const TargetResult& t : r.targets) converged += t.status == ShotStatus::converged;
    doc["config"] = path;
    doc["work_unit"] = "one step with the tangent; one without counts " + std::to_string(without);
    doc["targets"] = r.targets.size();
    doc["targets_converged"] = converged;
    doc["shots"] = r.shots;
    doc["shots_by_status"] = by;
    doc["total_work"] = total;
    doc["critical_path_work"] = critical;  // the launches one after another, each as long as its slowest shot
    doc["launches"] = launches;
    std::cout << doc.dump(1) << "\n";
    return 0;
  } catch (const ConfigError& e) {
    std::cerr << "tether_shot_work: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace
}  // namespace tether

int main(int argc, char** argv) { return tether::main_(argc, argv); }
