#pragma once
// Device memory shared between processes (torch.multiprocessing), as CUDA IPC
// shares GPU memory: a memfd that each process maps and registers as memory of
// the same device. The kernel frees it when the last mapping and descriptor go.
#include <cstddef>

namespace openreg {

struct SharedMemory {
  void* ptr = nullptr;
  std::size_t size = 0;
  int fd = -1;
  int device = -1;
};

// `size` bytes of new shared memory on `device`.
SharedMemory create_shared(int device, std::size_t size);
// Maps memory another process shared, given its descriptor (which it takes).
SharedMemory open_shared(int device, int fd, std::size_t size);
void close_shared(const SharedMemory& m);

}  // namespace openreg
