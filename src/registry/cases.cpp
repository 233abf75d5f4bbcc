#include "tether/engine/cases.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <vector>

#include "tether/engine/config_error.hpp"
#include "registry/catalog.hpp"

namespace tether {

namespace {

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(path, "cannot be read");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(path, std::string("is not valid JSON: ") + e.what());
  }
}

bool is_run_config_of(const nlohmann::json& c, const std::string& name) {
  return c.is_object() && !c.contains("shoot") && !c.contains("sample") && c.contains("system") && c["system"].is_object() &&
         c["system"].value("name", "") == name;
}

// "gauss_legendre_2", "lie_rattle_cayley", "composition_rattle".
std::string label(const std::string& name, const VariantInfo& v) {
  return v.key.empty() ? name : name + "_" + v.text();
}

}  // namespace

namespace {

// A system's example config: configs/<name>.json, else the first run config
// of that system in name order. The folder is listed, and each file parsed,
// at most once per index: the test binaries build every case at start-up,
// once per test process.
class ExampleConfigs {
 public:
  explicit ExampleConfigs(std::string dir) : dir_(std::move(dir)) {}

  std::string path(const std::string& name) {
    namespace fs = std::filesystem;
    const fs::path own = fs::path(dir_) / (name + ".json");
    if (fs::exists(own)) return own.string();
    list();
    for (std::size_t i = 0; i < files_.size(); ++i) {
      if (!parsed_[i]) parsed_[i] = read_json(files_[i].string());
      if (is_run_config_of(*parsed_[i], name)) return files_[i].string();
    }
    throw ConfigError(dir_, "has no example config for system \"" + name + "\": add " + own.string());
  }

 private:
  void list() {
    namespace fs = std::filesystem;
    if (listed_) return;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_, ec))
      if (e.path().extension() == ".json") files_.push_back(e.path());
    if (ec) throw ConfigError(dir_, "cannot be listed: " + ec.message());
    std::sort(files_.begin(), files_.end());
    parsed_.resize(files_.size());
    listed_ = true;
  }

  std::string dir_;
  bool listed_ = false;
  std::vector<std::filesystem::path> files_;
  std::vector<std::optional<nlohmann::json>> parsed_;
};

}  // namespace

std::string example_config_path(const std::string& configs_dir, const std::string& name) {
  return ExampleConfigs(configs_dir).path(name);
}

std::vector<RegistryCase> registry_cases(const std::string& configs_dir) {
  ExampleConfigs examples(configs_dir);
  std::vector<RegistryCase> cases;
  const auto& systems = system_infos();
  const auto& methods = method_infos();
  for (std::size_t s = 0; s < systems.size(); ++s) {
    const SystemInfo& si = systems[s];
    const std::string example = examples.path(si.name);
    const nlohmann::json ex = read_json(example);
    nlohmann::json system = ex["system"];
    std::string system_label = si.name;
    if (!si.variant.key.empty()) {
      system["parameters"][si.variant.key] = si.variant.value;
      system_label += si.variant.text();
    }
    for (int m : si.methods) {
      const MethodInfo& mi = methods[std::size_t(m)];
      nlohmann::json method{{"name", mi.name}, {"dt", ex["method"]["dt"]}, {"steps", ex["method"]["steps"]}};
      if (!mi.variant.key.empty()) method[mi.variant.key] = mi.variant.value;
      for (const auto& p : mi.parameters) {
        if (!p["default"].is_null()) continue;
        if (!p.contains("choices") || p["choices"].empty())
          throw ConfigError(mi.name + "." + p["name"].get<std::string>(),
                            "is required and has no choices: the registry cannot build a case for it");
        method[p["name"].get<std::string>()] = p["choices"][0];
      }
      RegistryCase c;
      c.system = int(s);
      c.method = m;
      c.system_label = system_label;
      c.method_label = label(mi.name, mi.variant);
      c.example = example;
      c.config = nlohmann::json{{"system", system}, {"method", method}, {"ensemble", ex["ensemble"]}};
      c.explicit_states = ex["ensemble"]["initial"].contains("states");
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

}  // namespace tether
