#pragma once
// Writers for a run's folder. Files are written under temporary names and
// renamed when complete; summary.json is renamed last, so a folder with a
// summary.json holds a finished run.
#include <filesystem>
#include <fstream>
#include <string>

#include "tether/engine/config.hpp"
#include "tether/engine/run.hpp"
#include "tether/engine/shooting.hpp"

namespace tether {

class OutputFolder {
 public:
  // Creates the folder and removes a previous run's files (summary.json,
  // final.csv, timeseries.csv, shots.csv, geodesics.csv), so stale results
  // never look like this run's.
  // Throws std::runtime_error.
  explicit OutputFolder(const std::filesystem::path& dir);

  std::filesystem::path partial(const std::string& name) const { return dir_ / (name + ".partial"); }
  // Renames name.partial to name.
  void commit(const std::string& name) const;

  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

// final.csv rows: id, q0..q{n-1}, p0..p{n-1}, status (shortest round-trip decimals).
class CsvFinalStates final : public FinalStateSink {
 public:
  CsvFinalStates(const std::filesystem::path& file, int dof);
  void write(std::int64_t id, const std::vector<Real>& q, const std::vector<Real>& p, Status status) override;
  void close();

 private:
  std::ofstream out_;
  std::filesystem::path file_;
  std::string line_;
};

void write_timeseries(const std::filesystem::path& file, const RunResult& r);
void write_summary(const std::filesystem::path& file, const RunConfig& c, const RunResult& r);

// `tether shoot`: shots.csv (one row per target), geodesics.csv, summary.json.
void write_shots(const std::filesystem::path& file, const ShootResult& r);
void write_geodesics(const std::filesystem::path& file, const ShootResult& r);
void write_shoot_summary(const std::filesystem::path& file, const ShootConfig& c, const ShootResult& r);

}  // namespace tether
