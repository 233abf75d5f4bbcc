"""The Heisenberg group's sub-Riemannian spheres, from `tether shoot`: the
distance from the origin to every target of a grid in the (x, z) plane
(y = 0), each found by shooting a geodesic to it, against the closed form.

The spheres are not round: they are pinched at the z axis, where every
target is reached by a circle of geodesics (the cut locus).

    python examples/heisenberg_sphere.py [--quick] [--out sphere.png]
"""
import argparse
import math

import matplotlib.pyplot as plt
import numpy as np

import tether


def exact_distance(x: float, z: float) -> float:
    """d((0,0,0), (x,0,z)): r theta / sin theta where (theta - sin theta cos theta) / (4 sin^2 theta) = |z| / r^2."""
    r = abs(x)
    if z == 0:
        return r
    lo, hi = 1e-12, math.pi - 1e-12
    for _ in range(100):
        mid = (lo + hi) / 2
        area = (mid - math.sin(mid) * math.cos(mid)) / (4 * math.sin(mid) ** 2)
        lo, hi = (mid, hi) if area * r * r < abs(z) else (lo, mid)
    return r * lo / math.sin(lo)


def main(quick: bool = False, out: str = "heisenberg_sphere.png") -> None:
    nx, nz = (6, 5) if quick else (24, 17)
    xs = np.linspace(0.05, 1.2, nx)  # x = 0 is the cut locus; the picture is symmetric in x
    config = {
        "system": {"name": "heisenberg"},
        "method": {"name": "gauss_legendre", "stages": 3, "steps": 80},
        "shoot": {"q0": [0, 0, 0], "time": 1.0,
                  "targets": {"grid": {"min": [xs[0], 0, -0.4], "max": [xs[-1], 0, 0.4], "count": [nx, 1, nz]}},
                  "guesses": {"toward": True, "random": {"count": 8, "scale": 2.0, "seed": 1}},
                  "newton": {"tolerance": 1e-12, "max_iterations": 40},
                  "continuation": {"rounds": 2, "substeps": 4}},
    }
    ds = tether.shoot(config)
    x, z = ds.q1.values[:, 0], ds.q1.values[:, 2]
    length = np.where(ds.status.values == 0, ds.length.values, np.nan)
    exact = np.array([exact_distance(a, b) for a, b in zip(x, z)])
    error = np.nanmax(np.abs(length - exact) / exact)
    grid = lambda v: v.reshape(nx, nz)  # targets run over z fastest
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 4.2))
    for sign in (1, -1):
        levels = ax.contour(sign * grid(x), grid(z), grid(length), levels=np.linspace(0.2, 1.4, 7), cmap="viridis")
    ax.clabel(levels, fontsize=7)
    ax.set_xlabel("x")
    ax.set_ylabel("z")
    ax.set_title("spheres d(0, q) = const in the plane y = 0")
    ax.axvline(0, color="0.7", lw=0.8, ls="--")
    bx.scatter(exact, np.abs(length - exact) / exact + 1e-17, s=8)
    bx.set_yscale("log")
    bx.set_xlabel("exact distance")
    bx.set_ylabel("relative error of the shot's length")
    bx.set_title(f"{int((ds.status == 0).sum())} of {ds.sizes['target']} solved; max error {error:.1e}")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"wrote {out}; max relative length error {error:.2e}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small grid (the tests use it)")
    parser.add_argument("--out", default="heisenberg_sphere.png")
    args = parser.parse_args()
    main(args.quick, args.out)
