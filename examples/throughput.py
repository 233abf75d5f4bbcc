"""Throughput against ensemble size: trajectory-steps per second of the cpu
backend, and of the cuda backend where this build has it and a GPU is
present, for the spherical pendulum under RATTLE (integration time only, as
summary.json's trajectory_steps_per_second).

A GPU needs tens of thousands of trajectories before it is busy; below
that the cpu backend is the better choice (`backend: auto` picks by size).

    python examples/throughput.py [--quick] [--out throughput.png]
"""
import argparse
import json

import matplotlib.pyplot as plt
import numpy as np

import tether


def rate(backend: str, size: int, steps: int) -> float:
    config = {
        "system": {"name": "spherical_pendulum"},
        "method": {"name": "rattle", "dt": 0.01, "steps": steps},
        "ensemble": {"size": size, "seed": 1, "initial": {"sampler": "thermal", "temperature": 0.5}},
        "output": {"every": steps, "final_states": False},
    }
    ds = tether.run(config, backend=backend, progress=False)
    return json.loads(ds.attrs["summary"])["trajectory_steps_per_second"]


def main(quick: bool = False, out: str = "throughput.png") -> None:
    sizes = [10**k for k in range(1, 4 if quick else 7)]
    backends = ["cpu"] + (["cuda"] if tether.backends()["cuda_built"] and tether.backends()["cuda_devices"] else [])
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for backend in backends:
        rates = [rate(backend, n, max(20, 2 * 10**7 // n if not quick else 100)) for n in sizes]
        ax.loglog(sizes, rates, "o-", label=backend)
        for n, r in zip(sizes, rates):
            print(f"{backend:5s} {n:>9d} trajectories: {r:.3g} trajectory-steps/s")
    ax.set_xlabel("trajectories in the ensemble")
    ax.set_ylabel("trajectory-steps per second")
    shown = " and ".join(backends)
    ax.set_title(f"spherical pendulum, RATTLE: {shown}" + ("" if "cuda" in backends else " (no GPU here)"))
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small ensembles (the tests use it)")
    parser.add_argument("--out", default="throughput.png")
    args = parser.parse_args()
    main(args.quick, args.out)
