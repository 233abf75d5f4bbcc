#pragma once

namespace tether {

// CUDA devices usable now: 0 when the driver or a device is missing.
int cuda_runtime_device_count();
// Makes `device` this process's current CUDA device (throws on failure).
void cuda_runtime_use_device(int device);

}  // namespace tether
