#pragma once
// openreg storages shared between processes (torch.multiprocessing), on the
// core's shared memory (core/shared.h).
#include <c10/core/Storage.h>

namespace openreg::glue {

struct SharedHandle {
  int fd;  // owned by the storage: duplicate it to send it
  std::size_t nbytes;
};

// Moves `storage` into shared memory the first time (its data is copied in
// stream order) and waits for the work queued on its device's current stream,
// so that a receiver sees what was written before the send.
SharedHandle share(const c10::Storage& storage);
// A storage of `nbytes` on openreg:`device` over memory another process shared; takes `fd`.
c10::Storage open_shared(int fd, std::size_t nbytes, c10::DeviceIndex device);

}  // namespace openreg::glue
