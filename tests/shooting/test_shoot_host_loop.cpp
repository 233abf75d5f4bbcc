// The host loop of `tether shoot` (src/engine/shooting.cpp) as a whole:
// a shoot resumed from any of its checkpoints, and a team of processes that
// share out its shots, stopped and resumed or not, give exactly the result
// of one uninterrupted shoot.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tether/engine/shooting.hpp"

namespace tether {
namespace {

// Heisenberg targets on a 9 x 7 grid of the (x, z) plane. `accuracy`: from
// the toward guess and four random ones, with shoot.accuracy (two passes);
// else at 16 steps from one poor random guess each, so that continuation
// rounds solve many of them.
ShootConfig small_grid(bool accuracy) {
  const std::string method = accuracy ? R"("stages": 2)" : R"("stages": 2, "steps": 16)";
  const std::string extra = accuracy ? R"("accuracy": 1e-8, "guesses": {"toward": true, "random": {"count": 4, "scale": 2.0, "seed": 1}},)"
                                     : R"("guesses": {"toward": false, "random": {"count": 1, "scale": 6.0, "seed": 1}},)";
  ShootConfig c = parse_shoot_config(R"({"system": {"name": "heisenberg"},
    "method": {"name": "gauss_legendre", )" + method + R"(},
    "shoot": {"q0": [0, 0, 0], "time": 1.0, )" + extra + R"(
              "targets": {"grid": {"min": [-1.2, 0, -0.4], "max": [1.2, 0, 0.4], "count": [9, 1, 7]}},
              "newton": {"tolerance": 1e-12, "max_iterations": 40},
              "continuation": {"rounds": 2, "substeps": 4}},
    "backend": "cpu"})",
                                     "small_grid");
  c.run.batch_size = 8;  // many batches: a checkpoint between each two
  return c;
}

// Every field of every target, and the counts: what shots.csv and summary.json are made of.
void expect_same(const ShootResult& a, const ShootResult& b, const std::string& what) {
  EXPECT_EQ(a.shots, b.shots) << what;
  EXPECT_EQ(a.shooting_iterations, b.shooting_iterations) << what;
  EXPECT_EQ(a.passes, b.passes) << what;
  EXPECT_EQ(a.steps, b.steps) << what;
  EXPECT_EQ(a.continuation_rounds_run, b.continuation_rounds_run) << what;
  EXPECT_EQ(a.accuracy_reached, b.accuracy_reached) << what;
  ASSERT_EQ(a.targets.size(), b.targets.size()) << what;
  for (std::size_t t = 0; t < a.targets.size(); ++t) {
    const TargetResult &x = a.targets[t], &y = b.targets[t];
    const auto same = [](Real u, Real v) { return u == v || (std::isnan(u) && std::isnan(v)); };
    EXPECT_EQ(x.status, y.status) << what << ", target " << t;
    EXPECT_EQ(x.iterations, y.iterations) << what << ", target " << t;
    EXPECT_EQ(x.attempts, y.attempts) << what << ", target " << t;
    EXPECT_EQ(x.converged_attempts, y.converged_attempts) << what << ", target " << t;
    EXPECT_EQ(x.round, y.round) << what << ", target " << t;
    EXPECT_EQ(x.near_cut_locus, y.near_cut_locus) << what << ", target " << t;
    for (const auto& [u, v] : {std::pair{x.residual, y.residual}, {x.length, y.length}, {x.energy, y.energy},
                               {x.conjugate_time, y.conjugate_time}, {x.error_estimate, y.error_estimate},
                               {x.second_length, y.second_length}})
      EXPECT_TRUE(same(u, v)) << what << ", target " << t << ": " << u << " vs " << v;
    for (std::size_t c = 0; c < x.p0.size(); ++c)
      EXPECT_TRUE(same(x.p0[c], y.p0[c]) && same(x.pT[c], y.pT[c])) << what << ", target " << t;
  }
}

TEST(ShootHostLoop, TheGridsNeedContinuationAndPasses) {  // (what the tests below lean on)
  const ShootResult rescue = shoot(small_grid(false), ShootOptions{});
  EXPECT_EQ(rescue.continuation_rounds_run, 2);
  std::int64_t rescued = 0;
  for (const auto& k : rescue.targets) rescued += k.round > 0 && k.status == ShotStatus::converged;
  EXPECT_GT(rescued, 10) << "continuation solved little: the tests would not cover its rounds";
  EXPECT_EQ(shoot(small_grid(true), ShootOptions{}).passes, 2);
}

// A checkpoint after every batch and before every continuation round, each
// resumed: every resumed shoot ends where the uninterrupted one does.
TEST(ShootHostLoop, ResumedFromAnyCheckpointGivesTheSameResult) {
  for (const bool accuracy : {false, true}) {
  SCOPED_TRACE(accuracy ? "two passes" : "continuation");
  const ShootConfig c = small_grid(accuracy);
  std::vector<std::string> checkpoints;
  ShootOptions opt;
  opt.checkpoint = [&](const std::string& bytes) { checkpoints.push_back(bytes); };
  opt.checkpoint_every = 1;
  const ShootResult whole = shoot(c, opt);
  ASSERT_GE(checkpoints.size(), 8u) << "few boundaries: the batches are larger than the test means";
  // About a dozen of them, spread over the passes and rounds, the last included.
  const std::size_t stride = std::max<std::size_t>(1, checkpoints.size() / 12);
  for (std::size_t k = checkpoints.size() - 1; k < checkpoints.size(); k = k >= stride ? k - stride : checkpoints.size()) {
    ShootOptions again;
    again.resume = &checkpoints[k];
    expect_same(shoot(c, again), whole, "resumed from checkpoint " + std::to_string(k));
  }
  // A stop writes a checkpoint and returns; resumed from it, the same again.
  volatile std::sig_atomic_t stop = 1;
  std::string last;
  ShootOptions stopping;
  stopping.checkpoint = [&](const std::string& bytes) { last = bytes; };
  stopping.stop = &stop;
  EXPECT_TRUE(shoot(c, stopping).stopped);
  ASSERT_FALSE(last.empty());
  ShootOptions again;
  again.resume = &last;
  expect_same(shoot(c, again), whole, "resumed after a stop");
  const std::string cut = checkpoints.back().substr(0, checkpoints.back().size() / 2);
  again.resume = &cut;
  EXPECT_THROW(shoot(c, again), std::runtime_error) << "a truncated checkpoint is refused";
  }
}

// A team of K members, each in its own thread, exchanging through an
// all-gather, as mpirun's ranks do: every member ends with the whole result,
// the single shoot's.
class Team {
 public:
  explicit Team(int size) : slots_(static_cast<std::size_t>(size)) {}
  std::vector<std::string> all_gather(int rank, const std::string& mine) {
    std::unique_lock<std::mutex> lock(m_);
    const std::uint64_t round = round_;
    slots_[std::size_t(rank)] = mine;
    if (++arrived_ == int(slots_.size())) {
      result_ = slots_;
      arrived_ = 0;
      ++round_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return round_ != round; });
    }
    return result_;
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<std::string> slots_, result_;
  int arrived_ = 0;
  std::uint64_t round_ = 0;
};

// Members of a team of `size`, each in its own thread, from `resume` (or
// fresh). With `checkpoints`, a checkpoint at every boundary, member 0's
// kept there; the last member is the only one asked to stop, once member 0
// has written `stop_after` of them. A member's error goes to `errors` (in
// rank order, empty where none), or fails the test.
std::vector<ShootResult> run_team(const ShootConfig& c, int size, const std::string* resume,
                                  std::vector<std::string>* checkpoints, std::size_t stop_after = SIZE_MAX,
                                  std::vector<std::string>* errors = nullptr) {
  Team team(size);
  std::vector<ShootResult> results(static_cast<std::size_t>(size));
  std::vector<std::string> failed(static_cast<std::size_t>(size));
  std::atomic<int> others_checkpoints{0};
  volatile std::sig_atomic_t stop = 0, never = 0;
  std::vector<std::thread> members;
  for (int rank = 0; rank < size; ++rank)
    members.emplace_back([&, rank] {
      ShootOptions opt;
      opt.team_rank = rank;
      opt.team_size = size;
      opt.all_gather = [&, rank](const std::string& mine) { return team.all_gather(rank, mine); };
      if (checkpoints != nullptr) {
        opt.checkpoint_every = 1;
        opt.checkpoint = [&, rank](const std::string& bytes) {
          if (rank != 0) return void(++others_checkpoints);
          checkpoints->push_back(bytes);
          if (checkpoints->size() >= stop_after) stop = 1;
        };
      }
      opt.stop = rank == size - 1 ? &stop : &never;
      opt.resume = resume;
      try {
        results[std::size_t(rank)] = shoot(c, opt);
      } catch (const std::exception& e) {
        failed[std::size_t(rank)] = e.what();
      }
    });
  for (auto& m : members) m.join();
  EXPECT_EQ(others_checkpoints, 0) << "only member 0 writes checkpoints";
  if (errors != nullptr) *errors = failed;
  for (const std::string& e : failed)
    if (errors == nullptr) EXPECT_TRUE(e.empty()) << e;
  return results;
}

TEST(ShootHostLoop, ATeamSharingTheShotsGivesTheSameResult) {
  for (const bool accuracy : {false, true})
  for (const int size : {2, 3}) {
    SCOPED_TRACE(accuracy ? "two passes" : "continuation");
    const ShootConfig c = small_grid(accuracy);
    const ShootResult whole = shoot(c, ShootOptions{});
    const std::vector<ShootResult> results = run_team(c, size, nullptr, nullptr);
    for (int rank = 0; rank < size; ++rank)
      expect_same(results[std::size_t(rank)], whole,
                  "member " + std::to_string(rank) + " of a team of " + std::to_string(size));
  }
}

// A team takes its checkpoints together (member 0 writes them), stops
// together when one member is asked to, and resumed from any checkpoint
// with as many members, ends with the single shoot's result.
TEST(ShootHostLoop, ATeamResumedFromItsCheckpointsGivesTheSameResult) {
  for (const char* variant : {"continuation", "two passes", "two passes, uneven"}) {
    SCOPED_TRACE(variant);
    const bool accuracy = variant[0] == 't';
    ShootConfig c = small_grid(accuracy);
    c.run.batch_size = 3;  // each member's third of the shots in many batches
    if (std::string(variant).find("uneven") != std::string::npos) {
      // Six Newton iterations a shot: the first pass leaves 26 targets
      // unsolved here and there, and the second pass shoots those from
      // every guess but the others from their seed once, so the members'
      // lists differ in length and a checkpoint finds them at different shots.
      c.shoot.max_iterations = 6;
    }
    const ShootResult whole = shoot(c, ShootOptions{});
    const int size = 3;
    std::vector<std::string> checkpoints;
    for (const ShootResult& r : run_team(c, size, nullptr, &checkpoints)) expect_same(r, whole, "the team uninterrupted");
    ASSERT_GE(checkpoints.size(), 8u);
    const std::size_t stride = std::max<std::size_t>(1, checkpoints.size() / 6);
    for (std::size_t k = 0; k < checkpoints.size(); k += stride) {
      std::vector<std::string> more;
      for (const ShootResult& r : run_team(c, size, &checkpoints[k], &more))
        expect_same(r, whole, "the team resumed from checkpoint " + std::to_string(k));
    }
    // Asked to stop: every member stops at the same boundary; resumed, the same result.
    std::vector<std::string> stopped;
    for (const ShootResult& r : run_team(c, size, nullptr, &stopped, 3)) EXPECT_TRUE(r.stopped);
    // The stop's own checkpoint comes at the next exchange that carries it
    // (that after the third, or the one after if the last member had sent
    // its message before the flag was raised).
    ASSERT_GE(stopped.size(), 4u);
    ASSERT_LE(stopped.size(), 5u);
    std::vector<std::string> more;
    for (const ShootResult& r : run_team(c, size, &stopped.back(), &more)) expect_same(r, whole, "the team resumed after a stop");
    // A team's checkpoint resumes with as many members only, and one process's with one.
    ShootOptions alone;
    alone.resume = &checkpoints[checkpoints.size() / 2];
    try {
      shoot(c, alone);
      ADD_FAILURE() << "a team's checkpoint resumed by one process";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("written by a team of 3: resume it with as many (mpirun -np 3), not 1"),
                std::string::npos) << e.what();
    }
    std::vector<std::string> solo;
    ShootOptions one;
    one.checkpoint_every = 1;
    one.checkpoint = [&](const std::string& bytes) { solo.push_back(bytes); };
    shoot(c, one);
    ASSERT_FALSE(solo.empty());
    std::vector<std::string> errors;
    run_team(c, 2, &solo.front(), &more, SIZE_MAX, &errors);
    for (const std::string& e : errors)
      EXPECT_NE(e.find("written by one process: resume it with as many (mpirun -np 1), not 2"), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace tether
