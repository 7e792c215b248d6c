#pragma once
// orccl: the c10d backend of the openreg device, built on gloo. Each call is
// checked on the host, then queued on one of the device's reserved streams
// after the work already queued on the current stream; there gloo runs on CPU
// tensors over the device memory (zero-copy), and the current stream waits
// for it as it would for NCCL's stream.
#include <functional>
#include <memory>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <vector>

#include "openreg/glue/launch.h"

namespace openreg::eager::distributed {

// One call handed to gloo: `issue` gets CPU tensors over `views`, in order.
struct Call {
  const char* name;
  int lane;                    // which reserved stream (see lanes in backend.cpp)
  std::vector<int64_t> agree;  // what every rank must agree on (agreement.h); empty: nothing
  std::vector<glue::HostView> views;
  std::function<c10::intrusive_ptr<c10d::Work>(c10d::Backend&, std::vector<at::Tensor>&)> issue;
  std::function<void(std::vector<at::Tensor>&)> finish;  // after gloo is done (AVG's division), may be empty
};

class Orccl final : public c10d::Backend {
 public:
  Orccl(c10::intrusive_ptr<c10d::Backend> gloo, int rank, int size);

  const std::string getBackendName() const override { return "orccl"; }
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  void setTimeout(std::chrono::milliseconds timeout) override { gloo_->setTimeout(timeout); }
  void setSequenceNumberForGroup() override { gloo_->setSequenceNumberForGroup(); }
  uint64_t getSequenceNumberForGroup() override { return gloo_->getSequenceNumberForGroup(); }
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;

  using TensorList = std::vector<at::Tensor>;
  using TensorLists = std::vector<TensorList>;
  c10::intrusive_ptr<c10d::Work> broadcast(TensorList& tensors, const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(TensorList& tensors, const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(TensorList& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(TensorList& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(TensorLists& outputs, TensorList& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(TensorLists& outputs, TensorList& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(TensorList& outputs, TensorList& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(TensorLists& outputs, TensorList& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(TensorList& outputs, TensorLists& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(TensorList& outputs, TensorLists& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(TensorList& outputs, TensorList& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits, std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(TensorList& outputs, TensorList& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(TensorList& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(TensorList& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(TensorList& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  // Checks the tensors of one call (openreg, one device, dense, contiguous),
  // naming the argument and this rank when they are not; returns the device.
  c10::DeviceIndex device_of(const char* op, std::initializer_list<const TensorList*> args) const;
  // Queues `call` (or adds it to the coalesced batch) and returns its Work.
  c10::intrusive_ptr<c10d::Work> run(c10::DeviceIndex device, Call call, TensorList outputs, c10d::OpType type,
                                     bool barrier = false);
  c10::intrusive_ptr<c10d::Work> queue(c10::DeviceIndex device, int lane, std::vector<Call> calls, TensorList outputs,
                                       c10d::OpType type, bool barrier);

  c10::intrusive_ptr<c10d::Backend> gloo_;
  bool coalescing_ = false;
  c10::DeviceIndex batch_device_ = -1;
  std::vector<Call> batch_;
  TensorList batch_outputs_;
};

}  // namespace openreg::eager::distributed
