#pragma once
// A sample's counts and sums as bytes (SampleResult::merge's operands): what
// a checkpoint and a shard's shard.tether both carry, written one way.
#include "engine/checkpoint_blob.hpp"
#include "tether/engine/sample.hpp"

namespace tether {

inline void save_sample_tally(BlobWriter& w, const SampleResult& r) {
  w.put(r.outcomes), w.put(r.acceptance), w.put(r.steps), w.put(r.step_size_min), w.put(r.step_size_max);
  w.put(r.sampling_seconds), w.put(r.chain_iterations), w.put(r.metric_fallbacks);
  w.put(r.metric_scale_min), w.put(r.metric_scale_max);
}

inline void load_sample_tally(BlobReader& b, SampleResult& r) {
  b.get(r.outcomes), b.get(r.acceptance), b.get(r.steps), b.get(r.step_size_min), b.get(r.step_size_max);
  b.get(r.sampling_seconds), b.get(r.chain_iterations), b.get(r.metric_fallbacks);
  b.get(r.metric_scale_min), b.get(r.metric_scale_max);
}

}  // namespace tether
