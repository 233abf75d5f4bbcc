#!/usr/bin/env bash
# Fuzzes the reading of configs and declared systems (tests/fuzz/fuzz_declaration.cpp)
# with libFuzzer under AddressSanitizer and UndefinedBehaviorSanitizer.
#   scripts/fuzz.sh [SECONDS] [BUILD]     default: 600 s, the build folder build/
# Needs clang and its runtime (Debian: clang, libclang-rt-14-dev) and a
# configured build folder (scripts/build.sh) for the rest of the engine and
# its generated headers. The files that read configs and declarations are
# compiled with clang's instrumentation; the rest is linked from
# BUILD/libtether_core.a.
# Each input found that crashes, hangs (10 s) or throws anything but a
# ConfigError is left as crash-*, timeout-*, oom-* in fuzz/: put it in
# tests/expr/test_declared_system.cpp as a bad declaration and fix it.
set -euo pipefail
seconds="${1:-600}"
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${2:-$root/build}" && pwd)"
out="$root/fuzz"
mkdir -p "$out/corpus" "$out/seeds" "$out/obj"
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
       -I"$root/src" -I"$root/include" -I"$build/generated" $(pkg-config --cflags eigen3 ginac))
for unit in src/config/config.cpp src/config/json_node.cpp src/expr/declared_system.cpp src/expr/repeated.cpp \
            tests/fuzz/fuzz_declaration.cpp; do
  clang++ "${flags[@]}" -c "$root/$unit" -o "$out/obj/$(basename "$unit" .cpp).o"
done
clang++ -fsanitize=fuzzer,address,undefined "$out"/obj/*.o "$build/libtether_core.a" \
  $(pkg-config --libs ginac netcdf) -lz -fopenmp -ldl -o "$out/fuzz_declaration"
# Seeds: every config in configs/ and each declaration alone, and expressions one per line.
python3 - "$root" "$out/seeds" <<'PY'
import json, pathlib, sys
root, seeds = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
for f in sorted((root / "configs").glob("*.json")):
    (seeds / ("config_" + f.stem)).write_text(f.read_text())
    d = json.loads(f.read_text()).get("system", {}).get("declare")
    if d:
        (seeds / f.stem).write_text(json.dumps(d))
(seeds / "expressions").write_text("m*g*z - 2*-x + y^-2\n(x^2 + y^2 + z^2 - L^2)/(2*L) + w\nsin(x)*atan2(y, pow(z, 3))")
PY
cd "$out"
# No leak checks: GiNaC leaks the objects it was building when it throws
# (the derivative of 0^z, log(0)), a few bytes for each declaration refused
# so, and LeakSanitizer would report their sum at exit as a crash.
ASAN_OPTIONS=detect_leaks=0 ./fuzz_declaration -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -max_len=4096 \
  -dict="$root/tests/fuzz/declaration.dict" -print_final_stats=1 corpus seeds
