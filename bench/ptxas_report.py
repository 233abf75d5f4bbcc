#!/usr/bin/env python3
"""Tabulates ptxas -v reports (one log per object, from bench/ptxas_report.sh):
registers, stack frame and spill bytes of every kernel entry, as JSON and as a
Markdown table grouped by kernel kind, largest frame first."""
import argparse
import datetime
import json
import os
import platform
import re
import subprocess

ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\d+)'")
PROPERTIES = re.compile(r"Function properties for (\S+)")
FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
USED = re.compile(r"Used (\d+) registers")
# tether's kernels, per (system, method) or per system; "library" is the rest
# (the shared reduction of runtime.cu); "function" a device function that a
# kernel calls (not inlined: ptxas reports its spills apart from the
# kernel's). Also the report's order.
KERNELS = ("advance_kernel", "advance_tile_kernel", "observe_kernel", "shoot_kernel", "chain_kernel", "chain_tile_kernel")
KINDS = KERNELS + ("library", "function")
# shoot_kernel's third argument, as c++filt writes it.
SHOOTING = {"(Shooting)0": "single", "(Shooting)1": "multiple"}


def parse_log(path):
    """Yields one record per kernel entry, and per device function a kernel
    calls, in a ptxas -v log (a function's record has no register count)."""
    current = None
    entry = None  # the entry whose report is being read
    with open(path) as f:
        for line in f:
            m = ENTRY.search(line)
            if m:
                entry = m.group(1)
                current = {"mangled": entry, "arch": m.group(2), "object": os.path.basename(path)[:-4]}
                continue
            m = PROPERTIES.search(line)
            if m and m.group(1) != entry:
                current = {"mangled": m.group(1), "arch": "", "object": os.path.basename(path)[:-4],
                           "function": True}
                continue
            if current is None:
                continue
            m = FRAME.search(line)
            if m and "stack_frame" not in current:
                current.update(stack_frame=int(m.group(1)), spill_stores=int(m.group(2)),
                               spill_loads=int(m.group(3)))
                if current.get("function"):
                    current["registers"] = None
                    yield current
                    current = None
                continue
            m = USED.search(line)
            if m:
                current["registers"] = int(m.group(1))
                yield current
                current = None


def template_args(name, kernel):
    """The top-level template arguments of kernel<...> in a demangled name."""
    start = name.find(kernel + "<")
    if start < 0:
        return []
    i = start + len(kernel) + 1
    depth, arg, args = 1, "", []
    while i < len(name) and depth > 0:
        c = name[i]
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
            if depth == 0:
                break
        if c == "," and depth == 1:
            args.append(arg.strip())
            arg = ""
        else:
            arg += c
        i += 1
    args.append(arg.strip())
    return [a.replace("tether::", "") for a in args]


def describe(record, demangled):
    record["kernel"] = demangled
    if record.pop("function", False):
        record.update(kind="function", system="", method="")
        return record
    for kind in KERNELS:
        if "tether::" + kind + "<" in demangled:
            args = template_args(demangled, "tether::" + kind)
            method = args[1] if len(args) > 1 else ""
            if len(args) > 2:
                method += ", " + SHOOTING.get(args[2], args[2]) + " shooting"
            record.update(kind=kind, system=args[0], method=method)
            return record
    record.update(kind="library", system="", method="")
    return record


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("logs", help="folder of <object>.log files")
    ap.add_argument("--commit", required=True)
    ap.add_argument("--command", default="")
    ap.add_argument("--nvcc", default="")
    ap.add_argument("-o", "--output", required=True, help="path without extension: writes .json and .md")
    a = ap.parse_args()

    records = []
    for name in sorted(os.listdir(a.logs)):
        if name.endswith(".log"):
            records.extend(parse_log(os.path.join(a.logs, name)))
    if not records:
        raise SystemExit("ptxas_report: no kernel entries found in " + a.logs + " (was -Xptxas -v passed?)")
    # A template kernel or function that several units use is compiled in each
    # (observe_kernel<S> in every method's unit): the same code, listed once.
    unique = {}
    for r in records:
        unique.setdefault(r["mangled"], r)
    records = list(unique.values())
    names = subprocess.run(["c++filt"], input="\n".join(r["mangled"] for r in records), capture_output=True,
                           text=True, check=True).stdout.splitlines()
    records = [describe(r, d) for r, d in zip(records, names)]
    records.sort(key=lambda r: (KINDS.index(r["kind"]), -r["stack_frame"], -r["spill_stores"], r["system"], r["method"],
                                r["kernel"]))

    tether_kernels = [r for r in records if r["kind"] in KERNELS]
    functions = [r for r in records if r["kind"] == "function"]
    summary = {
        "kernels": len(tether_kernels),
        "at_254_or_more_registers": sum(r["registers"] >= 254 for r in tether_kernels),
        "spilling": sum(r["spill_stores"] > 0 for r in tether_kernels),
        "largest_stack_frame": max(r["stack_frame"] for r in tether_kernels),
        "called_functions": len(functions),
        "called_functions_spilling": sum(r["spill_stores"] > 0 for r in functions),
    }
    doc = {
        "report": "ptxas -v per kernel entry",
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": a.commit,
        "command": a.command,
        "nvcc": a.nvcc,
        "host": platform.node(),
        "summary": summary,
        "kernels": records,
    }
    with open(a.output + ".json", "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")

    lines = [f"# ptxas -v, sm_90, commit {a.commit}", "",
             f"{a.nvcc}; `{a.command}`; {doc['date_utc']}.", "",
             f"{summary['kernels']} tether kernels: {summary['at_254_or_more_registers']} at 254-255 registers, "
             f"{summary['spilling']} spilling, largest stack frame {summary['largest_stack_frame']} bytes; "
             f"{summary['called_functions']} device functions called out of line, "
             f"{summary['called_functions_spilling']} of them spilling (their spills are not in their kernels' "
             "figures).", ""]
    for kind in KINDS:
        rows = [r for r in records if r["kind"] == kind]
        if not rows:
            continue
        lines += [f"## {kind}", "", "| system | method | registers | stack frame (B) | spill stores (B) | spill loads (B) |",
                  "|---|---|---:|---:|---:|---:|"]
        for r in rows:
            label = (r["system"], r["method"]) if kind in KERNELS else (r["kernel"][:90], "")
            registers = r["registers"] if r["registers"] is not None else "-"
            lines.append(f"| {label[0]} | {label[1]} | {registers} | {r['stack_frame']} | "
                         f"{r['spill_stores']} | {r['spill_loads']} |")
        lines.append("")
    with open(a.output + ".md", "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
