#include "cli/mpi_run.hpp"

#include <mpi.h>

#include <cstdlib>

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

int mpi_max(int value) {
  if (!started) return value;
  int worst = 0;
  MPI_Allreduce(&value, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

}  // namespace tether::cli
