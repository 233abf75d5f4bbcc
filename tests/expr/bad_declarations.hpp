#pragma once
// Bad declarations as test cases (tests/expr): each an edit of a good one,
// refused by parse_declared_system with one ConfigError at `path` whose
// message holds `message`.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "expr/declared_system.hpp"
#include "tether/engine/config_error.hpp"

namespace tether::test {

struct BadDeclaration {
  std::string name;
  std::function<void(nlohmann::json&)> edit;
  std::string path, message;
};

inline void expect_refused(const nlohmann::json& good, const std::vector<BadDeclaration>& cases) {
  for (const BadDeclaration& c : cases) {
    nlohmann::json j = good;
    c.edit(j);
    try {
      parse_declared_system(j, "system.declare");
      ADD_FAILURE() << c.name << ": accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.path(), c.path) << c.name << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << c.name << ": " << e.what();
    }
  }
}

}  // namespace tether::test
