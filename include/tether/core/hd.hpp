#pragma once
// The one host/device macro: step code is written once and compiled for the
// CPU backends and, under nvcc, for the GPU.
#if defined(__CUDACC__)
#define TETHER_HD __host__ __device__
#else
#define TETHER_HD
#endif
