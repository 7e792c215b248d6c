#pragma once
// The Work of an orccl call: NCCL's semantics on openreg's streams. wait()
// makes the current stream wait for the call without blocking the host
// (a barrier's blocks the host, as NCCL's does); the future is completed with
// the outputs on the call's stream, so its callbacks run after it.
#include <ATen/core/ivalue.h>

#include <memory>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

#include "openreg/core/stream.h"

namespace openreg::eager::distributed {

class OrcclWork final : public c10d::Work {
 public:
  OrcclWork(int rank, c10d::OpType type, const char* title, c10::DeviceIndex device, std::shared_ptr<Event> done,
            std::vector<at::Tensor> outputs, bool barrier);

  bool isCompleted() override;
  bool wait(std::chrono::milliseconds timeout) override;
  void synchronize() override { wait(kNoTimeout); }
  void blockCurrentStream() override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  // Completes the future; call on the stream the call was queued on.
  void complete_future();

 private:
  c10::DeviceIndex device_;
  std::shared_ptr<Event> done_;  // recorded after the call; shared by a coalesced batch
  std::vector<at::Tensor> outputs_;
  bool barrier_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace openreg::eager::distributed
