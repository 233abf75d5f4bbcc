#pragma once
// The one host/device macro: step code is written once and compiled for the
// CPU backends and, under nvcc, for the GPU.
#if defined(__CUDACC__)
#define TETHER_HD __host__ __device__
#else
#define TETHER_HD
#endif

// A host loop with a short, fixed trip count, unrolled in full: GCC otherwise
// wraps each short inner loop in vector prologues and epilogues that cost
// more than its body (DenseLU<18>::solve: 367 -> 246 ns on the 2-core VM).
// Code that nvcc compiles (the kernels) is left to its own unrolling.
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define TETHER_UNROLL _Pragma("GCC unroll 32")
#else
#define TETHER_UNROLL
#endif

// A loop that must be unrolled in full on a GPU thread as well: its indices
// then are compile-time constants, and the small arrays it indexes can stay
// in registers (an index known only at run time puts the array in local memory).
#if defined(__CUDACC__)
#define TETHER_UNROLL_FULL _Pragma("unroll")
#elif defined(__GNUC__) && !defined(__clang__)
#define TETHER_UNROLL_FULL _Pragma("GCC unroll 32")
#else
#define TETHER_UNROLL_FULL
#endif

// A loop a GPU thread keeps rolled: each trip's numbers then die before the
// next trip's are made, where unrolled the compiler keeps them all live at
// once (a shot's tangent columns: the Heisenberg GL1 shoot_kernel's spills).
#if defined(__CUDA_ARCH__)
#define TETHER_DEVICE_ROLLED _Pragma("unroll 1")
#else
#define TETHER_DEVICE_ROLLED
#endif

// An operation on a tile's lanes on the host (core/tile.hpp): one line of
// arithmetic over all lanes, which must be inlined to cost what the line
// does. In the large generated units GCC's inlining budget runs out first on
// such small functions (chain16's RATTLE on the cpu ran at 0.66x).
#if defined(__GNUC__) && !defined(__CUDACC__)
#define TETHER_LANE_OP __attribute__((always_inline)) inline
#else
#define TETHER_LANE_OP
#endif

// A host function whose every caller must run the same machine code: a Monte
// Carlo chain, which `tether sample` runs and a canonical start replays bit
// for bit, from separately compiled units. noipa keeps GCC from inlining or
// cloning it into a caller, where other floating-point contractions would
// change the last bits; the linker keeps one copy for every unit.
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define TETHER_ONE_COPY __attribute__((noipa))
#else
#define TETHER_ONE_COPY
#endif

// A function a GPU thread calls rather than inlines: a shot's step, which its
// kernel calls from four places (the endpoint, the sweep, the report, the
// nodes), and those integrations themselves. Inlined, each copy keeps its own
// local arrays in the thread's stack frame; called, they share one (a third
// less stack for the parking car's GL3 shoot_kernel, a fifth of the
// instructions: bench/README.md, "One stage LU per shot"), and the kernel
// spills less around the calls ("The integrations called"). The host
// compilers inline as they see fit.
#if defined(__CUDA_ARCH__)
#define TETHER_DEVICE_CALL __noinline__
#else
#define TETHER_DEVICE_CALL
#endif
