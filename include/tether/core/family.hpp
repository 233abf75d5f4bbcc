#pragma once
// The system families of the registry, by name (the concepts that define
// them are in core/families.hpp).
namespace tether {

enum class Family { holonomic, nonholonomic, mixed, lagrangian };

inline constexpr Family all_families[] = {Family::holonomic, Family::nonholonomic, Family::mixed, Family::lagrangian};

constexpr const char* family_name(Family f) {
  switch (f) {
    case Family::holonomic: return "holonomic";
    case Family::nonholonomic: return "nonholonomic";
    case Family::mixed: return "holonomic + nonholonomic";
    case Family::lagrangian: return "lagrangian";
  }
  return "";
}

}  // namespace tether
