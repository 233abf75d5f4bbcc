"""Constrained HMC on the sphere: the spherical pendulum's height z at
temperature kT, sampled by RATTLE-HMC chains (`tether sample`), against its
exact density. On a sphere of radius L the area measure makes z uniform
(Archimedes), so the Gibbs density of z = q_3 is exp(-m g z / kT) on [-L, L],
normalised.

    python examples/hmc_marginals.py [--quick] [--out marginals.png]
"""
import argparse

import matplotlib.pyplot as plt
import numpy as np

import tether


def main(quick: bool = False, out: str = "hmc_marginals.png") -> None:
    chains, draws = (64, 100) if quick else (1000, 1000)
    m, g, L, kT = 1.0, 9.81, 1.0, 5.0
    config = {
        "system": {"name": "spherical_pendulum", "parameters": {"mass": m, "length": L, "gravity": g}},
        "method": {"name": "rattle", "dt": 0.1, "steps": 10, "newton": {"tolerance": 1e-13}},
        "sample": {"chains": chains, "draws": draws, "warmup": 200, "seed": 11, "temperature": kT,
                   "jitter": {"dt": 0.1}},
    }
    result = tether.sample(config)
    posterior = result.posterior if hasattr(result, "posterior") else result["posterior"]
    z = posterior.q.sel(q_dim=2).values.ravel()
    a = m * g / kT
    grid = np.linspace(-L, L, 400)
    density = a * np.exp(-a * grid) / (np.exp(a * L) - np.exp(-a * L))
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    ax.hist(z, bins=60, range=(-L, L), density=True, alpha=0.6, label=f"{chains} chains x {draws} draws")
    ax.plot(grid, density, "k", lw=1.5, label="exact: a exp(-a z) / (2 sinh(a L)), a = m g / kT")
    ax.set_xlabel("z = q_3")
    ax.set_ylabel("density")
    ax.set_title(f"spherical pendulum, kT = {kT}: HMC draws and the exact marginal")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few chains (the tests use it)")
    parser.add_argument("--out", default="hmc_marginals.png")
    args = parser.parse_args()
    main(args.quick, args.out)
