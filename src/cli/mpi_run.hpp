#pragma once
// The one place the command meets MPI (built when CMake finds it): ranks,
// a barrier that carries each rank's outcome, an all-gather of bytes (the
// shooting team's exchange) and an abort. Without MPI, or when not started
// by mpirun, the world is one process.
#include <cstdlib>
#include <string>
#include <vector>

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
// Every rank's bytes, in rank order, on every rank.
std::vector<std::string> mpi_all_gather(const std::string& mine);
// Ends every rank (a rank failed where the others wait for it in a collective).
[[noreturn]] void mpi_abort(int code);
#else
inline MpiWorld mpi_start(int&, char**&) { return {}; }
inline void mpi_finish() {}
inline int mpi_max(int value) { return value; }
inline std::vector<std::string> mpi_all_gather(const std::string& mine) { return {mine}; }
[[noreturn]] inline void mpi_abort(int code) { std::exit(code); }
#endif

}  // namespace tether::cli
