#pragma once
// A netCDF call's failure as the error every writer and reader of tether's
// netCDF files reports: the action, the file, what was being done, and
// the library's reason.
#include <netcdf.h>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace tether {

// action: "write" or "read".
inline void netcdf_check(int status, const char* action, const std::string& what, const std::filesystem::path& file) {
  if (status != NC_NOERR)
    throw std::runtime_error(std::string("cannot ") + action + " " + file.string() + " (" + what + "): " + nc_strerror(status));
}

}  // namespace tether
