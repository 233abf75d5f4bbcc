#!/usr/bin/env python3
"""Plots a `tether shoot` run: the level sets of the geodesic length over the
targets (the sub-Riemannian distance from q0 when the targets form a grid and
V = 0) and some of the solved geodesics.

    tools/plot_shoot.py runs/sphere                 # writes runs/sphere/distance.png, geodesics.png
    tools/plot_shoot.py runs/sphere --geodesics 40  # how many geodesics to draw (default 30)

Reads shots.csv (and geodesics.csv when the run wrote one). Only converged
targets enter the level sets; targets whose kept geodesic crossed a conjugate
point (not minimising) are marked with a cross, targets flagged near the cut
locus (where the distance may not be smooth) with a small circle.
"""
import argparse
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", help="output folder of `tether shoot`")
    ap.add_argument("--geodesics", type=int, default=30, help="geodesics to draw (default 30)")
    ap.add_argument("--levels", type=int, default=12, help="contour levels (default 12)")
    args = ap.parse_args()

    shots_path = os.path.join(args.run, "shots.csv")
    if not os.path.exists(shots_path):
        sys.exit(f"error: {shots_path} is missing (is {args.run} a `tether shoot` output folder?)")
    rows = read_rows(shots_path)
    if not rows:
        sys.exit(f"error: {shots_path} has no targets")
    dof = sum(1 for k in rows[0] if k.startswith("q1_"))
    target = lambda r: [float(r[f"q1_{c}"]) for c in range(dof)]
    ok = [r for r in rows if r["converged"] == "1"]
    print(f"{len(ok)} of {len(rows)} targets converged")

    # The two target coordinates that vary most span the level-set plane.
    spans = []
    for c in range(dof):
        xs = [target(r)[c] for r in rows]
        spans.append((max(xs) - min(xs), c))
    spans.sort(reverse=True)
    (_, a), (_, b) = spans[0], spans[1]
    if len(ok) >= 3 and spans[1][0] > 0:
        fig, ax = plt.subplots(figsize=(6.5, 5))
        xs = [target(r)[a] for r in ok]
        ys = [target(r)[b] for r in ok]
        ls = [float(r["length"]) for r in ok]
        cs = ax.tricontourf(xs, ys, ls, levels=args.levels, cmap="viridis")
        ax.tricontour(xs, ys, ls, levels=args.levels, colors="k", linewidths=0.4)
        fig.colorbar(cs, ax=ax, label="length of the shortest geodesic found")
        conj = [r for r in ok if r["conjugate_point"] == "1"]
        near = [r for r in ok if r.get("near_cut_locus") == "1" and r["conjugate_point"] != "1"]
        if near:
            ax.plot([target(r)[a] for r in near], [target(r)[b] for r in near], "o", color="orange", ms=3,
                    label="near the cut locus")
        if conj:
            ax.plot([target(r)[a] for r in conj], [target(r)[b] for r in conj], "rx", ms=4,
                    label="conjugate point crossed")
        bad = [r for r in rows if r["converged"] != "1"]
        if bad:
            ax.plot([target(r)[a] for r in bad], [target(r)[b] for r in bad], "ko", mfc="none", ms=4,
                    label="not converged")
        if conj or bad or near:
            ax.legend(loc="upper right", fontsize=8)
        ax.set_xlabel(f"q{a}")
        ax.set_ylabel(f"q{b}")
        ax.set_title("level sets of the distance from q0")
        fig.tight_layout()
        out = os.path.join(args.run, "distance.png")
        fig.savefig(out, dpi=150)
        print(f"wrote {out}")

    geo_path = os.path.join(args.run, "geodesics.csv")
    if os.path.exists(geo_path):
        curves = {}
        for r in read_rows(geo_path):
            curves.setdefault(r["target"], []).append([float(r[f"q{c}"]) for c in range(dof)])
        keys = list(curves)
        step = max(1, len(keys) // max(1, args.geodesics))
        fig = plt.figure(figsize=(6.5, 5.5))
        ax = fig.add_subplot(projection="3d") if dof >= 3 else fig.add_subplot()
        for k in keys[::step][: args.geodesics]:
            pts = curves[k]
            cols = [[p[c] for p in pts] for c in range(min(dof, 3))]
            ax.plot(*cols, lw=0.8)
        ax.set_xlabel("q0")
        ax.set_ylabel("q1")
        if dof >= 3:
            ax.set_zlabel("q2")
        ax.set_title("solved geodesics from q0")
        fig.tight_layout()
        out = os.path.join(args.run, "geodesics.png")
        fig.savefig(out, dpi=150)
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
