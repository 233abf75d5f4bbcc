#!/usr/bin/env python3
"""Where a kernel touches local memory: its LDL/STL instructions (spills, and
arrays the compiler could not keep in registers) counted by loop depth, from
the machine code (SASS) of an object file or cubin.

ptxas -v (bench/ptxas_report.sh) gives the bytes a kernel spills, not where:
a spill once per launch costs nothing, one inside the step loop costs every
step. A loop here is the range of a backward branch; an instruction's depth is
the number of such ranges around it (0: once per thread; in advance_kernel 1
is the step loop, in chain_kernel 1 the transition loop and 3 a proposal's
steps).

With --ops, each loop's instructions are counted too: all of them, the FP64 ones
(DFMA, DMUL, DADD, DSETP: the pipe a GPU has least of) and the MUFU ones (the
start of a division or a square root). Counts are static: a loop's body once,
every branch of it included, which is how two kernels of the same step compare
(bench/README.md, "RATTLE on a GPU thread, counted").

    bench/sass_loops.py OBJECT_OR_CUBIN [--kernel SUBSTRING] [--ops]

Needs cuobjdump (CUDA toolkit, or `pip install nvidia-cuda-cuobjdump`; set
CUOBJDUMP to its path)."""
import argparse
import os
import re
import shutil
import subprocess

INSTRUCTION = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?);")
BRANCH = re.compile(r"\bBRA\b.*?0x([0-9a-f]+)")
LOCAL = re.compile(r"\b(LDL|STL)\b")
FP64 = re.compile(r"^(@!?U?P\w+\s+)?(DFMA|DMUL|DADD|DSETP|DMNMX)\b")
MUFU = re.compile(r"^(@!?U?P\w+\s+)?MUFU\b")


def kernels(sass):
    """(mangled name, [(address, text)]) per function in cuobjdump -sass output."""
    for part in re.split(r"\n\s*Function : ", sass)[1:]:
        name, body = part.split("\n", 1)
        code = []
        for line in body.split("\n"):
            m = INSTRUCTION.match(line)
            if m:
                code.append((int(m.group(1), 16), m.group(2)))
        yield name.strip(), code


def backward_branches(code):
    """(first, last) address of each loop: the range of a backward branch."""
    loops = []
    for address, text in code:
        m = BRANCH.search(text)
        if m and int(m.group(1), 16) < address:
            loops.append((int(m.group(1), 16), address))
    return loops


def loop_ops(code):
    """Per loop, outermost first: (first, last, instructions, FP64, MUFU, LDL/STL)."""
    rows = []
    for lo, hi in sorted(backward_branches(code), key=lambda r: (r[0] - r[1], r[0])):
        body = [t for a, t in code if lo <= a <= hi]
        rows.append((lo, hi, len(body), sum(bool(FP64.search(t)) for t in body),
                     sum(bool(MUFU.search(t)) for t in body), sum(bool(LOCAL.search(t)) for t in body)))
    return rows


def local_by_depth(code):
    loops = backward_branches(code)
    depth = {}
    for address, text in code:
        if LOCAL.search(text):
            d = sum(lo <= address <= hi for lo, hi in loops)
            depth[d] = depth.get(d, 0) + 1
    deepest = max((sum(lo <= a <= hi for lo, hi in loops) for a, _ in code), default=0)
    return depth, deepest


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary", help="an object file or cubin with sm_XX machine code")
    ap.add_argument("--kernel", default="", help="only kernels whose mangled name contains this")
    ap.add_argument("--ops", action="store_true", help="also count each loop's instructions, FP64 and MUFU ones")
    a = ap.parse_args()
    tool = os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump")
    if not tool:
        raise SystemExit("sass_loops: cuobjdump not found (set CUOBJDUMP)")
    sass = subprocess.run([tool, "-sass", a.binary], capture_output=True, text=True, check=True).stdout
    found = [(n, c) for n, c in kernels(sass) if a.kernel in n]
    if not found:
        raise SystemExit("sass_loops: no machine code for a matching kernel in " + a.binary)
    names = subprocess.run(["c++filt"], input="\n".join(n for n, _ in found), capture_output=True, text=True,
                           check=True).stdout.splitlines()
    for (name, code), readable in zip(found, names):
        depth, deepest = local_by_depth(code)
        counts = ", ".join(f"depth {d}: {depth.get(d, 0)}" for d in range(deepest + 1))
        print(f"{readable[:150]}\n  {len(code)} instructions, loops nested {deepest} deep; "
              f"local-memory instructions by depth: {counts}")
        if a.ops:
            for lo, hi, n, fp64, mufu, local in loop_ops(code):
                print(f"  loop {lo:#x}-{hi:#x}: {n} instructions, {fp64} FP64, {mufu} MUFU, {local} LDL/STL")


if __name__ == "__main__":
    main()
