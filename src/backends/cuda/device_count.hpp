#pragma once

namespace tether {

// CUDA devices usable now: 0 when the driver or a device is missing.
int cuda_runtime_device_count();

}  // namespace tether
