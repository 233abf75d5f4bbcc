#!/usr/bin/env python3
"""Shots per second of `tether shoot`, every backend side by side in one run.

    bench/run_shoot_bench.py                       # reference, cpu (and cuda when present); saves bench/results/
    bench/run_shoot_bench.py --targets 4096 --backends cpu,cuda
    bench/run_shoot_bench.py --tether build/tether --no-save

For each (system, method) case a shooting config is written with `--targets`
random targets (seeded) and the `toward` guess plus `--guesses` random ones, and
`tether shoot --backend B` runs that same config for each backend B, in turn,
in this one run (so every backend shoots the same shots; the reference backend
is serial and slow, which is what keeps --targets small by default).
Rates come from each run's summary.json: shots_per_second = shots /
shooting_seconds (the time inside the shot runners; config parsing, target
generation and file output excluded), and shooting_iterations per second.
Raw results (machine, commit, command, every run's summary numbers) are saved
to bench/results/<date>-<host>-shoot.json.
"""
import argparse
import contextlib
import csv
import datetime
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# (label, system, parameters, method, stages, steps, q0, target box, guess scale)
CASES = [
    ("heisenberg/gl1", "heisenberg", {}, "gauss_legendre", 1, 40, [0, 0, 0], ([-1, -1, -0.3], [1, 1, 0.3]), 2.0),
    ("heisenberg/gl2", "heisenberg", {}, "gauss_legendre", 2, 40, [0, 0, 0], ([-1, -1, -0.3], [1, 1, 0.3]), 2.0),
    ("heisenberg/gl3", "heisenberg", {}, "gauss_legendre", 3, 40, [0, 0, 0], ([-1, -1, -0.3], [1, 1, 0.3]), 2.0),
    ("heisenberg/stormer_verlet", "heisenberg", {}, "stormer_verlet", 0, 40, [0, 0, 0],
     ([-1, -1, -0.3], [1, 1, 0.3]), 2.0),
    ("martinet/gl2", "martinet", {"beta": 0.5}, "gauss_legendre", 2, 40, [0, 0, 0],
     ([-0.5, -0.5, -0.1], [0.5, 0.5, 0.1]), 1.0),
    ("heisenberg_vakonomic/gl2", "heisenberg_vakonomic", {}, "gauss_legendre", 2, 40, [0, 0, 0],
     ([-0.5, -0.5, -0.2], [0.5, 0.5, 0.2]), 1.0),
    ("parallel_parking/gl2", "parallel_parking", {}, "gauss_legendre", 2, 20, [0, 0, 0, 0],
     ([-0.1, -0.1, -0.1, -0.1], [0.1, 0.1, 0.1, 0.1]), 1.0),
]


def git(*args):
    try:
        return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True, check=True).stdout.strip()
    except Exception:
        return "unknown"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def provenance():
    """When, where, at which commit and by which command a result was measured."""
    return {"date": datetime.datetime.now().isoformat(timespec="seconds"),
            "machine": {"host": socket.gethostname(), "cpu": cpu_model(), "cores": os.cpu_count()},
            "commit": git("rev-parse", "--short", "HEAD"), "dirty": bool(git("status", "--porcelain")),
            "command": " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:])}


def build_of(binary):
    """How a tether binary was built, from the CMakeCache.txt beside it: its instruction set
    (TETHER_CPU_ARCH; empty is the portable baseline) and build type."""
    found = {"binary": os.path.relpath(binary, ROOT)}
    try:
        with open(os.path.join(os.path.dirname(os.path.abspath(binary)), "CMakeCache.txt")) as f:
            for line in f:
                for key in ("TETHER_CPU_ARCH", "CMAKE_BUILD_TYPE"):
                    if line.startswith(key + ":"):
                        found[key] = line.split("=", 1)[1].strip()
    except OSError:
        pass
    if "TETHER_CPU_ARCH" in found:
        found["TETHER_CPU_ARCH"] = found["TETHER_CPU_ARCH"] or "portable"
    return found


@contextlib.contextmanager
def tether_output(binary, command, config, threads):
    """`tether COMMAND` (shoot, sample) on config (a dict) in a scratch folder; yields its output
    folder and its summary.json, both gone when the block ends."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "config.json")
        with open(path, "w") as f:
            json.dump(config, f)
        out = os.path.join(tmp, "out")
        subprocess.run([binary, command, path, "--out", out, "--threads", str(threads), "--quiet"], check=True)
        with open(os.path.join(out, "summary.json")) as f:
            yield out, json.load(f)


def tether_shoot(binary, config, threads):
    """`tether shoot` on config (a dict): its summary.json and shots.csv rows."""
    with tether_output(binary, "shoot", config, threads) as (out, summary):
        with open(os.path.join(out, "shots.csv")) as f:
            rows = list(csv.DictReader(f))
    return summary, rows


def read_final_states(path):
    """A `tether run` final.csv as {column: numpy array}: pandas where it is there (10^6 rows in
    about a second), else numpy's genfromtxt (many seconds)."""
    try:
        import pandas
        table = pandas.read_csv(path)
        return {name: table[name].to_numpy() for name in table.columns}
    except ImportError:
        import numpy
        table = numpy.genfromtxt(path, delimiter=",", names=True, dtype=None, encoding="ascii")
        return {name: table[name] for name in table.dtype.names}


def save_result(text, kind):
    """Writes bench/results/<date>-<host>-<kind>.json, never over an earlier run; returns the name."""
    stem = f"{datetime.date.today().isoformat()}-{socket.gethostname()}-{kind}"
    name, k = f"{stem}.json", 2
    while os.path.exists(os.path.join(HERE, "results", name)):
        name, k = f"{stem}-{k}.json", k + 1
    with open(os.path.join(HERE, "results", name), "w") as f:
        f.write(text + "\n")
    return name


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tether", default=os.path.join(ROOT, "build", "tether"), help="tether binary (default build/tether)")
    ap.add_argument("--backends", default="", help="comma list (default: reference,cpu and cuda when `tether list` has a device)")
    ap.add_argument("--targets", type=int, default=32, help="random targets per case (default 32)")
    ap.add_argument("--guesses", type=int, default=1, help="random guesses per target besides `toward` (default 1)")
    ap.add_argument("--cases", default="", help="comma list of case labels (default all)")
    ap.add_argument("--threads", type=int, default=0, help="cpu threads (default all cores)")
    ap.add_argument("--no-save", action="store_true", help="print the JSON only")
    args = ap.parse_args()

    if not os.access(args.tether, os.X_OK):
        sys.exit(f"error: {args.tether} is not an executable tether binary (build first, or pass --tether)")
    listing = subprocess.run([args.tether, "list"], capture_output=True, text=True).stdout
    backends = [b for b in args.backends.split(",") if b] if args.backends else ["reference", "cpu"]
    if not args.backends and "device(s) present" in listing and " 0 device(s)" not in listing:
        backends.append("cuda")
    cases = [c for c in CASES if not args.cases or c[0] in args.cases.split(",")]
    if not cases:
        sys.exit("error: --cases matches none of: " + ", ".join(c[0] for c in CASES))

    results, errors = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for label, system, prm, method, stages, steps, q0, (lo, hi), scale in cases:
            for backend in backends:
                count = args.targets
                m = {"name": method, "steps": steps}
                if stages:
                    m["stages"] = stages
                cfg = {
                    "system": {"name": system, "parameters": prm},
                    "method": m,
                    "shoot": {"q0": q0, "time": 1.0,
                              "targets": {"random": {"count": count, "min": lo, "max": hi, "seed": 11}},
                              "guesses": {"toward": True, "random": {"count": args.guesses, "scale": scale, "seed": 3}},
                              "newton": {"tolerance": 1e-10, "max_iterations": 40}},
                    "backend": backend,
                }
                path = os.path.join(tmp, "cfg.json")
                with open(path, "w") as f:
                    json.dump(cfg, f)
                out = os.path.join(tmp, f"out-{backend}")
                cmd = [args.tether, "shoot", path, "--out", out, "--quiet"]
                if args.threads and backend == "cpu":
                    cmd += ["--threads", str(args.threads)]
                print(f"[shoot_bench] {label} on {backend}: {count} targets", file=sys.stderr, flush=True)
                run = subprocess.run(cmd, capture_output=True, text=True)
                if run.returncode != 0:
                    errors.append({"case": label, "backend": backend, "exit": run.returncode, "stderr": run.stderr.strip()})
                    continue
                with open(os.path.join(out, "summary.json")) as f:
                    s = json.load(f)
                results.append({
                    "case": label, "system": system, "method": method, "stages": stages, "backend": backend,
                    "steps": steps, "targets": s["targets"], "converged": s["converged"], "shots": s["shots"],
                    "shooting_iterations": s["shooting_iterations"],
                    "mean_iterations_converged": s["newton"]["mean_iterations_converged"],
                    "shooting_seconds": s["shooting_seconds"], "shots_per_second": s["shots_per_second"],
                    "iterations_per_second": s["shooting_iterations"] / s["shooting_seconds"] if s["shooting_seconds"] > 0 else 0,
                })

    # Ratios within this run: each backend against the reference, per shot.
    for r in results:
        ref = next((x for x in results if x["case"] == r["case"] and x["backend"] == "reference"), None)
        if ref and ref["shots_per_second"] > 0 and r["backend"] != "reference":
            r["speedup_vs_reference"] = r["shots_per_second"] / ref["shots_per_second"]

    doc = {
        "benchmark": "tether shoot: shots per second",
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": {"host": socket.gethostname(), "cpu": cpu_model(), "cores": os.cpu_count(),
                    "tether_list_backends": [l.strip() for l in listing.splitlines() if l.strip().startswith(("cpu", "cuda"))]},
        "commit": git("rev-parse", "HEAD"),
        "dirty": bool(git("status", "--porcelain")),
        "command": " ".join([sys.argv[0], *sys.argv[1:]]),
        "settings": {"targets": args.targets, "guesses": 1 + args.guesses,
                     "time": 1.0, "threads": args.threads or os.cpu_count()},
        "results": results,
        "errors": errors,
    }
    text = json.dumps(doc, indent=2)
    print(text)
    if not args.no_save:
        host = "".join(c if c.isalnum() or c in "._-" else "_" for c in socket.gethostname())
        name = os.path.join(HERE, "results", f"{datetime.date.today().isoformat()}-{host}-shoot")
        out, n = name + ".json", 2
        while os.path.exists(out):
            out, n = f"{name}-{n}.json", n + 1
        with open(out, "w") as f:
            f.write(text + "\n")
        print(f"[shoot_bench] saved {out}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
