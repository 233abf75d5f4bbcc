#pragma once
// The one place the command meets MPI (built when CMake finds it): ranks
// and a barrier that carries each rank's outcome. Without MPI, or when not
// started by mpirun, the world is one process.
namespace tether::cli {

struct MpiWorld {
  int rank = 0, size = 1;
};

#ifdef TETHER_HAVE_MPI
// Initialises MPI when mpirun (OpenMPI, or a PMI launcher such as srun) started this process.
MpiWorld mpi_start(int& argc, char**& argv);
void mpi_finish();
// The largest of every rank's value (a barrier): their worst exit code.
int mpi_max(int value);
#else
inline MpiWorld mpi_start(int&, char**&) { return {}; }
inline void mpi_finish() {}
inline int mpi_max(int value) { return value; }
#endif

}  // namespace tether::cli
