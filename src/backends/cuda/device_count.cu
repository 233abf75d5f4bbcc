#include <cuda_runtime.h>

#include "backends/cuda/device_count.hpp"

namespace tether {

// 0 when the driver or a device is missing: the cpu backend is used then.
int cuda_runtime_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

}  // namespace tether
