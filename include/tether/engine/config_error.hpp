#pragma once
#include <stdexcept>
#include <string>

namespace tether {

// A bad input: `path` is the JSON path (e.g. "method.dt"), or the file.
class ConfigError : public std::runtime_error {
 public:
  ConfigError(std::string path, const std::string& message);  // config.cpp
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace tether
