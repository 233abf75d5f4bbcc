"""The Python package's cuda path on a GPU: tether.run, tether.shoot and tether.sample
with backend="cuda" against backend="cpu" in one process (the wheel built on the
development VM with nvcc, cp312, kernels to sm_90)."""
import json, sys, time
import numpy as np
import tether

GPU = sys.argv[2] if len(sys.argv) > 2 else "cuda"  # ("cpu" for a dry run without a GPU)

print("tether", tether.__file__, "python", sys.version.split()[0], "numpy", np.__version__)
print("backends", tether.backends())
out = {}

run_cfg = {"system": {"name": "spherical_pendulum"}, "method": {"name": "rattle", "dt": 0.01, "steps": 200},
           "ensemble": {"size": 200000, "seed": 4, "initial": {"sampler": "thermal", "temperature": 0.5}}}
runs = {}
for b in (GPU, "cpu"):
    t = time.perf_counter()
    runs[b] = tether.run(run_cfg, backend=b, progress=False)
    wall = time.perf_counter() - t
    a = runs[b].attrs
    summary = json.loads(a["summary"])
    out[f"run_{b}"] = {"backend": a.get("backend"), "wall_seconds_python": wall,
                       **{k: summary.get(k) for k in ("integration_seconds", "trajectory_steps_per_second")}}
    print("run", b, out[f"run_{b}"], flush=True)
dq = float(np.abs(runs[GPU].q.values - runs["cpu"].q.values).max())
out["run_max_abs_q_difference"] = dq
print("run: max |q_cuda - q_cpu|", dq, "statuses equal", bool((runs[GPU].status.values == runs["cpu"].status.values).all()))

# Explicit states handed over as NumPy arrays (the buffers, not JSON text).
q = runs["cpu"].q.values[:1000].copy()
p = runs["cpu"].p.values[:1000].copy()
explicit = dict(run_cfg, ensemble={"initial": {"states": {"q": q, "p": p}}})
e = {b: tether.run(explicit, backend=b, progress=False) for b in (GPU, "cpu")}
out["explicit_max_abs_q_difference"] = float(np.abs(e[GPU].q.values - e["cpu"].q.values).max())
print("explicit states: backend", e[GPU].attrs.get("backend"), "max diff", out["explicit_max_abs_q_difference"])

shoot_cfg = json.load(open("configs/heisenberg_sphere.json"))
shots = {}
for b in (GPU, "cpu"):
    t = time.perf_counter()
    shots[b] = tether.shoot(shoot_cfg, backend=b, progress=False)
    out[f"shoot_{b}"] = {"backend": shots[b].attrs.get("backend"), "wall_seconds_python": time.perf_counter() - t,
                         "converged": int(shots[b].converged.sum()), "shots_per_second": shots[b].attrs.get("shots_per_second")}
    print("shoot", b, out[f"shoot_{b}"], flush=True)
both = shots[GPU].converged.values & shots["cpu"].converged.values
length = {b: shots[b].length.values[both] for b in shots}
out["shoot_max_rel_length_difference"] = float(np.abs(length[GPU] - length["cpu"]).max() / np.abs(length["cpu"]).max())
print("shoot: max relative length difference", out["shoot_max_rel_length_difference"])

sample_cfg = json.load(open("configs/double_pendulum_sample.json"))
for b in (GPU, "cpu"):
    t = time.perf_counter()
    s = tether.sample(sample_cfg, backend=b, progress=False)
    wall = time.perf_counter() - t
    kind = type(s).__name__
    post = s.posterior if hasattr(s, "posterior") else s["posterior"]
    out[f"sample_{b}"] = {"type": kind, "wall_seconds_python": wall, "q_shape": list(post.q.shape),
                          "q_mean": [float(x) for x in post.q.mean(dim=("chain", "draw")).values]}
    print("sample", b, out[f"sample_{b}"], flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
print("python check: done")
