#include "openreg/glue/sharing.h"

#include <algorithm>

#include "openreg/core/shared.h"
#include "openreg/glue/allocator.h"
#include "openreg/glue/launch.h"

namespace openreg::glue {
namespace {

// In stream order, as the allocator frees: kernels queued before the storage
// died may still use the memory.
void close_in_order(SharedMemory* memory) {
  auto close = [memory] {
    close_shared(*memory);
    delete memory;
  };
  try {
    launch(static_cast<c10::DeviceIndex>(memory->device), "free shared memory", {}, close);
  } catch (...) {
    close();  // no stream to order it on (a forked child, the process's exit)
  }
}

void delete_shared(void* ctx) { close_in_order(static_cast<SharedMemory*>(ctx)); }
// Memory another process shared: the same, but it may not be sent on, as with CUDA.
void delete_received(void* ctx) { close_in_order(static_cast<SharedMemory*>(ctx)); }

at::DataPtr data_ptr(SharedMemory* memory, c10::DeleterFnPtr deleter) {
  return {memory->ptr, memory, deleter,
          c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(memory->device))};
}

}  // namespace

SharedHandle share(const c10::Storage& storage) {
  const auto device = storage.device().index();
  TORCH_CHECK(storage.data_ptr().get_deleter() != &delete_received,
              "Attempted to send openreg tensor received from another process; this is not currently supported. "
              "Consider cloning before sending.");
  if (storage.data_ptr().get_deleter() != &delete_shared) {
    const std::size_t size = std::max<std::size_t>(storage.nbytes(), 1);
    auto* memory = new SharedMemory(checked([&] { return create_shared(device, size); }));
    at::DataPtr fresh = data_ptr(memory, &delete_shared);
    if (storage.nbytes() > 0) device_allocator()->copy_data(fresh.get(), storage.data(), storage.nbytes());
    storage.unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(fresh));
  }
  checked([&] { core_stream(current_stream(device)).synchronize(); });
  return {static_cast<SharedMemory*>(storage.data_ptr().get_context())->fd, storage.nbytes()};
}

c10::Storage open_shared(int fd, std::size_t nbytes, c10::DeviceIndex device) {
  const std::size_t size = std::max<std::size_t>(nbytes, 1);
  auto* memory = new SharedMemory(checked([&] { return openreg::open_shared(device, fd, size); }));
  return c10::Storage(c10::Storage::use_byte_size_t(), nbytes, data_ptr(memory, &delete_received),
                      /*allocator=*/nullptr, /*resizable=*/false);
}

}  // namespace openreg::glue
