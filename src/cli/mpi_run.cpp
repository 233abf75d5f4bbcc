#include "cli/mpi_run.hpp"

#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <stdexcept>

namespace tether::cli {

namespace {
bool started = false;
}

MpiWorld mpi_start(int& argc, char**& argv) {
  // Only under a launcher: a plain `tether run` never pays MPI's start-up.
  if (std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr && std::getenv("PMI_SIZE") == nullptr &&
      std::getenv("PMIX_RANK") == nullptr)
    return {};
  MPI_Init(&argc, &argv);
  started = true;
  MpiWorld w;
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  return w;
}

void mpi_finish() {
  if (started) MPI_Finalize();
  started = false;
}

std::vector<std::string> mpi_all_gather(const std::string& mine) {
  if (!started) return {mine};
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // Byte counts first (each below 2 GiB: a phase's results of one rank), then the bytes.
  if (mine.size() > std::size_t(INT_MAX)) throw std::runtime_error("a rank's share of the results exceeds 2 GiB");
  const int count = int(mine.size());
  std::vector<int> counts(static_cast<std::size_t>(size)), offsets(static_cast<std::size_t>(size));
  MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  long long total = 0;
  for (int k = 0; k < size; ++k) {
    if (total > INT_MAX) throw std::runtime_error("the ranks' results exceed 2 GiB in one exchange");
    offsets[std::size_t(k)] = int(total);
    total += counts[std::size_t(k)];
  }
  if (total > INT_MAX) throw std::runtime_error("the ranks' results exceed 2 GiB in one exchange");
  std::string all(std::size_t(total), '\0');
  MPI_Allgatherv(mine.data(), count, MPI_BYTE, all.data(), counts.data(), offsets.data(), MPI_BYTE, MPI_COMM_WORLD);
  std::vector<std::string> out;
  for (int k = 0; k < size; ++k) out.push_back(all.substr(std::size_t(offsets[std::size_t(k)]), std::size_t(counts[std::size_t(k)])));
  return out;
}

void mpi_abort(int code) {
  if (started) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

int mpi_max(int value) {
  if (!started) return value;
  int worst = 0;
  MPI_Allreduce(&value, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

}  // namespace tether::cli
