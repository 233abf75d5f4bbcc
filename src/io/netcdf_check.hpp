#pragma once
// A netCDF call's failure as the error every writer and reader of tether's
// netCDF files reports: the action, the file, what was being done, and
// the library's reason.
#include <netcdf.h>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace tether {

// Records that a write failed (netcdf_file_left_broken, tether/engine/output.hpp).
void mark_netcdf_write_failed();

// action: "write" or "read".
inline void netcdf_check(int status, const char* action, const std::string& what, const std::filesystem::path& file) {
  if (status == NC_NOERR) return;
  if (std::string(action) == "write") mark_netcdf_write_failed();
  throw std::runtime_error(std::string("cannot ") + action + " " + file.string() + " (" + what + "): " + nc_strerror(status));
}

// A file being written that will not be finished (an error on the way):
// closed without flushing what a full disk refused, so that neither this nor
// the HDF5 library's clean-up at exit goes on writing into it.
inline void netcdf_discard(int id) {
  if (nc_abort(id) != NC_NOERR) nc_close(id);
}

// The end of a file written whole; a failure (a full disk) leaves it discarded, not open.
inline void netcdf_close(int id, const std::filesystem::path& file) {
  const int status = nc_close(id);
  if (status != NC_NOERR) nc_abort(id);
  netcdf_check(status, "write", "close", file);
}

}  // namespace tether
