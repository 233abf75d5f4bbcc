#!/usr/bin/env python3
"""Whether two CSV files hold the same numbers: the same header, the same
rows, every numeric field within TOL of the other relative to max(1, |x|),
every other field equal; only the COLUMNS named, where given. Prints the
largest difference; exit 1 when they differ (scripts/gpu-check.sh: cuda's
outputs against cpu's).

    tools/same_numbers.py TOL A.csv B.csv [COLUMN,COLUMN,...]
"""
import csv
import sys


def number(text):
    try:
        return float(text)
    except ValueError:
        return None


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit("usage: same_numbers.py TOL A.csv B.csv [COLUMN,COLUMN,...]")
    tol = float(sys.argv[1])
    with open(sys.argv[2], newline="") as fa, open(sys.argv[3], newline="") as fb:
        a, b = list(csv.reader(fa)), list(csv.reader(fb))
    if len(a) != len(b) or not a or a[0] != b[0]:
        sys.exit(f"{sys.argv[2]} and {sys.argv[3]}: different headers or numbers of rows ({len(a)}, {len(b)})")
    columns = set(sys.argv[4].split(",")) if len(sys.argv) == 5 else set(a[0])
    if not columns <= set(a[0]):
        sys.exit(f"{sys.argv[2]} has no column {', '.join(sorted(columns - set(a[0])))}")
    worst, where = 0.0, None
    for i, (ra, rb) in enumerate(zip(a[1:], b[1:]), start=2):
        if len(ra) != len(rb):
            sys.exit(f"line {i}: {len(ra)} fields against {len(rb)}")
        for name, x, y in zip(a[0], ra, rb):
            if name not in columns:
                continue
            u, v = number(x), number(y)
            if u is None or v is None:
                if x != y:
                    sys.exit(f"line {i}, {name}: {x!r} against {y!r}")
                continue
            d = abs(u - v) / max(1.0, abs(u))
            if d != d:  # a NaN on one side only
                d = float("inf") if (u == u) != (v == v) else 0.0
            if d > worst:
                worst, where = d, f"line {i}, {name}: {x} against {y}"
    print(f"{sys.argv[2]} against {sys.argv[3]}: {len(a) - 1} rows, largest relative difference {worst:.3g}"
          + (f" ({where})" if where else ""))
    sys.exit(0 if worst <= tol else 1)


if __name__ == "__main__":
    main()
