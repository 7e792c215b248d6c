#include "work.h"

#include <ATen/core/jit_type.h>

#include "openreg/glue/launch.h"

namespace openreg::eager::distributed {

OrcclWork::OrcclWork(int rank, c10d::OpType type, const char* title, c10::DeviceIndex device,
                     std::shared_ptr<Event> done, std::vector<at::Tensor> outputs, bool barrier)
    : Work(rank, type, title),
      device_(device),
      done_(std::move(done)),
      outputs_(std::move(outputs)),
      barrier_(barrier),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                   std::vector<c10::Device>{{c10::DeviceType::PrivateUse1, device}})) {}

bool OrcclWork::isCompleted() {
  return glue::checked([&] { return done_->query(); });
}

bool OrcclWork::wait(std::chrono::milliseconds) {
  if (barrier_) {
    // dist.barrier() returns once every rank has arrived, as NCCL's does.
    glue::checked([&] {
      done_->synchronize();
      raise_pending_error(device_);
    });
  } else {
    blockCurrentStream();
  }
  return true;
}

void OrcclWork::blockCurrentStream() {
  glue::checked([&] { done_->block(current_stream(device_)); });
}

void OrcclWork::complete_future() { future_->markCompleted(c10::IValue(outputs_)); }

}  // namespace openreg::eager::distributed
