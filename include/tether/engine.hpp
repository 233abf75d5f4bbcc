#pragma once
// tether's host API, one header: read a config, run an ensemble or a set of
// shots or Monte Carlo chains on a backend, write a run's folder, and list what the registry holds.
// The CLI, the tests, the benchmark and the Python package use this header;
// nothing outside the library reaches into src/.
//
//   const tether::RunConfig config = tether::load_config_file("configs/four_bar.json");
//   const tether::RunResult result = tether::run(config, {});   // throws tether::ConfigError on bad input
//
// The step library underneath (systems, methods: tether/registry.hpp) is
// header-only and needs none of this.
#include "tether/engine/cases.hpp"         // every allowed (system, method) pair as a config
#include "tether/engine/catalog.hpp"       // systems, methods, their parameter schemas
#include "tether/engine/config.hpp"        // RunConfig, ShootConfig, parse_config, load_config_file
#include "tether/engine/config_error.hpp"  // ConfigError: what is wrong and where
#include "tether/engine/diagnostics.hpp"   // R-hat and ESS of chains (VGSCB21)
#include "tether/engine/output.hpp"        // summary.json, final.csv, timeseries.csv, shots.csv
#include "tether/engine/run.hpp"           // run, RunResult, RunOptions, FinalStateSink, resolve_backend
#include "tether/engine/sample.hpp"        // sample, SampleConfig, SampleResult, DrawSink
#include "tether/engine/shooting.hpp"      // shoot, ShootResult
