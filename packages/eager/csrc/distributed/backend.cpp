#include "backend.h"

#include <c10/core/DeviceGuard.h>
#include <c10/core/StreamGuard.h>

#include "agreement.h"
#include "openreg/core/device.h"
#include "openreg/core/memory.h"
#include "work.h"

namespace openreg::eager::distributed {
namespace {

using c10d::OpType;
using TensorList = Orccl::TensorList;
using TensorLists = Orccl::TensorLists;

// The reserved streams orccl queues on. Sends and receives have a stream
// each, apart from collectives, so that a rank's isend/irecv pair (gloo's
// usual exchange) cannot wait on itself: gloo's send waits for the peer's
// receive.
enum Lane { kCollectives = 0, kSends = 1, kRecvs = 2 };

// The tensors of one call, flattened for the task, and the lengths to cut
// them back into the lists gloo takes.
struct Args {
  std::vector<glue::HostView> views;
  std::vector<size_t> lengths;
  Args& add(const TensorList& list) {
    for (const at::Tensor& t : list) views.push_back(glue::HostView::of(t));
    lengths.push_back(list.size());
    return *this;
  }
  Args& add(const TensorLists& lists) {
    for (const TensorList& list : lists) add(list);
    return *this;
  }
};

// Cuts the task's CPU tensors back into lists, in the order Args added them.
class Cut {
 public:
  Cut(TensorList& cpu, const std::vector<size_t>& lengths) : cpu_(cpu), lengths_(lengths) {}
  TensorList list() {
    size_t n = lengths_.at(next_++);
    TensorList out(cpu_.begin() + at_, cpu_.begin() + at_ + n);
    at_ += n;
    return out;
  }
  TensorLists lists(size_t n) {
    TensorLists out;
    for (size_t i = 0; i < n; ++i) out.push_back(list());
    return out;
  }
  at::Tensor one() { return list().at(0); }

 private:
  TensorList& cpu_;
  const std::vector<size_t>& lengths_;
  size_t at_ = 0, next_ = 0;
};

Call make_call(const char* name, int lane, std::vector<int64_t> agree, Args args,
               std::function<c10::intrusive_ptr<c10d::Work>(c10d::Backend&, Cut&)> issue,
               std::function<void(TensorList&)> finish = nullptr) {
  auto lengths = std::make_shared<std::vector<size_t>>(std::move(args.lengths));
  return Call{name,
              lane,
              std::move(agree),
              std::move(args.views),
              [lengths, issue = std::move(issue)](c10d::Backend& gloo, TensorList& cpu) {
                Cut cut(cpu, *lengths);
                return issue(gloo, cut);
              },
              std::move(finish)};
}

// gloo has neither AVG nor PREMUL_SUM, which NCCL has and FSDP2 asks for: they
// are gloo's SUM, then the first `outputs` results scaled on the stream.
template <typename Options>
std::function<void(TensorList&)> to_gloo(Options& opts, int size, size_t outputs) {
  double factor;
  switch (opts.reduceOp.op_) {
    case c10d::ReduceOp::AVG:
      factor = 1.0 / size;
      break;
    case c10d::ReduceOp::PREMUL_SUM: {
      auto* premul = dynamic_cast<c10d::PreMulSumSupplement*>(opts.reduceOp.supplement_.get());
      TORCH_CHECK_VALUE(premul != nullptr && !premul->tensor_factor.defined(),
                        "orccl supports PREMUL_SUM with a Python number as the factor "
                        "(torch.distributed._make_nccl_premul_sum(0.5)), not a tensor");
      factor = premul->double_factor;
      break;
    }
    default:
      return nullptr;
  }
  bool average = opts.reduceOp.op_ == c10d::ReduceOp::AVG;
  opts.reduceOp = c10d::ReduceOp(c10d::ReduceOp::SUM);
  return [factor, size, average, outputs](TensorList& cpu) {
    for (size_t i = 0; i < outputs; ++i) {
      if (average && at::isIntegralType(cpu[i].scalar_type(), /*includeBool=*/true)) {
        cpu[i].div_(size, "trunc");  // NCCL's integer average
      } else {
        cpu[i].mul_(factor);
      }
    }
  };
}

// Hands every call to gloo before it waits for any: a coalesced batch of
// sends and receives needs them all posted.
void run_calls(c10d::Backend& gloo, std::vector<Call>& calls) {
  std::vector<TensorList> cpu(calls.size());
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  for (size_t i = 0; i < calls.size(); ++i) {
    if (!calls[i].agree.empty()) check_agreement(gloo, calls[i].name, calls[i].agree);
    for (const glue::HostView& v : calls[i].views) cpu[i].push_back(v.tensor());
    works.push_back(calls[i].issue(gloo, cpu[i]));
  }
  for (size_t i = 0; i < calls.size(); ++i) {
    works[i]->wait();
    if (calls[i].finish) calls[i].finish(cpu[i]);
  }
}

TensorList flatten(const TensorLists& lists) {
  TensorList flat;
  for (const TensorList& list : lists) flat.insert(flat.end(), list.begin(), list.end());
  return flat;
}

c10::Stream lane_stream(c10::DeviceIndex device, int lane) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device), reserved_stream(lane));
}

}  // namespace

Orccl::Orccl(c10::intrusive_ptr<c10d::Backend> gloo, int rank, int size)
    : Backend(rank, size), gloo_(std::move(gloo)) {}

c10::DeviceIndex Orccl::device_of(const char* op, std::initializer_list<const TensorList*> args) const {
  c10::DeviceIndex device = -1;
  for (const TensorList* list : args) {
    for (const at::Tensor& t : *list) {
      TORCH_CHECK_VALUE(t.defined(), "orccl ", op, " on rank ", rank_, ": a tensor argument is undefined (None)");
      TORCH_CHECK_VALUE(t.device().type() == c10::DeviceType::PrivateUse1, "orccl ", op, " on rank ", rank_, ": got a ",
                        t.scalar_type(), " tensor of shape ", t.sizes(), " on ", t.device(),
                        "; the orccl backend communicates openreg tensors. Move it to the device (.to('openreg')), "
                        "or give CPU tensors to gloo: init_process_group('cpu:gloo,openreg:orccl')");
      TORCH_CHECK_VALUE(t.layout() == at::kStrided && t.is_contiguous(), "orccl ", op, " on rank ", rank_, ": the ",
                        t.scalar_type(), " tensor of shape ", t.sizes(), " is not a contiguous dense tensor (strides ",
                        t.strides(), ", layout ", t.layout(), "); call .contiguous() first");
      TORCH_CHECK_VALUE(device < 0 || device == t.device().index(), "orccl ", op, " on rank ", rank_,
                        ": its tensors are on openreg:", static_cast<int>(device), " and ", t.device(),
                        "; one call takes one device");
      device = t.device().index();
    }
  }
  return device >= 0 ? device : static_cast<c10::DeviceIndex>(current_device());
}

c10::intrusive_ptr<c10d::Work> Orccl::run(c10::DeviceIndex device, Call call, TensorList outputs, OpType type,
                                          bool barrier) {
  if (coalescing_) {
    TORCH_CHECK_VALUE(batch_device_ < 0 || batch_device_ == device, "orccl: the calls of one coalesced batch ",
                      "(batch_isend_irecv, _coalescing_manager) must use one device; got openreg:",
                      static_cast<int>(batch_device_), " and openreg:", static_cast<int>(device));
    batch_device_ = device;
    batch_.push_back(std::move(call));
    batch_outputs_.insert(batch_outputs_.end(), outputs.begin(), outputs.end());
    return nullptr;  // as NCCL: the batch's Work comes from endCoalescing
  }
  int lane = call.lane;
  std::vector<Call> calls;
  calls.push_back(std::move(call));
  return queue(device, lane, std::move(calls), std::move(outputs), type, barrier);
}

c10::intrusive_ptr<c10d::Work> Orccl::queue(c10::DeviceIndex device, int lane, std::vector<Call> calls,
                                            TensorList outputs, OpType type, bool barrier) {
  c10::DeviceGuard device_guard(c10::Device(c10::DeviceType::PrivateUse1, device));
  auto done = std::make_shared<Event>();
  const char* name = calls.size() == 1 ? calls[0].name : "orccl::coalesced";
  glue::Touches touches;
  for (const Call& call : calls) {
    for (const glue::HostView& v : call.views) {
      const bool written = std::any_of(outputs.begin(), outputs.end(),
                                       [&](const at::Tensor& t) { return t.defined() && t.data_ptr() == v.data(); });
      touches.emplace_back(v.data(), written);
    }
  }
  Stream& user = glue::checked([&]() -> Stream& { return current_stream(device); });
  Stream& comm = glue::checked([&]() -> Stream& { return get_stream(device, reserved_stream(lane)); });
  glue::checked([&] {
    Event ready;  // the call reads what the user's stream queued before it
    ready.record(user);
    ready.block(comm);
  });
  glue::checked([&] {
    // As NCCL's: the memory of the call's tensors is not reused before the
    // lane has run it, even when they are freed first (a temporary, or an
    // async_op=True call whose Work is dropped).
    DeviceMemory& memory = device_memory(device);
    for (const Call& call : calls) {
      for (const glue::HostView& v : call.views) {
        if (v.base != nullptr && memory.allocation_at(v.base) != 0) memory.record_stream(v.base, comm);
      }
    }
  });
  c10::StreamGuard on_lane(lane_stream(device, lane));
  glue::launch(device, name, std::move(touches), [gloo = gloo_, calls = std::move(calls), name]() mutable {
    try {
      run_calls(*gloo, calls);
    } catch (const c10::Error&) {
      throw;
    } catch (const std::exception& e) {
      // gloo's own errors (a peer gone, a timeout) are what NCCL reports as DistBackendError.
      C10_THROW_ERROR(DistBackendError,
                      std::string(name) + " on rank " + std::to_string(gloo->getRank()) + ": " + e.what());
    }
  });
  glue::checked([&] { done->record(comm); });
  auto work = c10::make_intrusive<OrcclWork>(rank_, type, name, device, done, std::move(outputs), barrier);
  work->complete_future();  // on the lane: the future's callbacks run after the call
  return work;
}

void Orccl::startCoalescing() {
  TORCH_CHECK(!coalescing_, "orccl: coalescing started twice; end the open batch first");
  coalescing_ = true;
  batch_device_ = -1;
}

c10::intrusive_ptr<c10d::Work> Orccl::endCoalescing() {
  TORCH_CHECK(coalescing_, "orccl: endCoalescing without startCoalescing");
  coalescing_ = false;
  std::vector<Call> calls = std::move(batch_);
  TensorList outputs = std::move(batch_outputs_);
  batch_.clear();
  batch_outputs_.clear();
  c10::DeviceIndex device = batch_device_ >= 0 ? batch_device_ : static_cast<c10::DeviceIndex>(current_device());
  return queue(device, kCollectives, std::move(calls), std::move(outputs), OpType::COALESCED, false);
}

void Orccl::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  glue::checked([&] { synchronize_device(current_device()); });  // the host waits for the device first
  gloo_->monitoredBarrier(opts, wait_all_ranks);
}

// The collectives: each checks its tensors, then says how gloo runs it on
// their CPU views; outputs come first, so that reductions scale them.

c10::intrusive_ptr<c10d::Work> Orccl::broadcast(TensorList& tensors, const c10d::BroadcastOptions& opts) {
  auto device = device_of("broadcast", {&tensors});
  return run(
      device,
      make_call("orccl::broadcast", kCollectives, signature(OpType::BROADCAST, -1, &tensors.at(0)), Args().add(tensors),
                [opts](c10d::Backend& g, Cut& c) {
                  auto t = c.list();
                  return g.broadcast(t, opts);
                }),
      tensors, OpType::BROADCAST);
}

c10::intrusive_ptr<c10d::Work> Orccl::allreduce(TensorList& tensors, const c10d::AllreduceOptions& opts) {
  auto device = device_of("all_reduce", {&tensors});
  auto gloo_opts = opts;
  auto finish = to_gloo(gloo_opts, size_, tensors.size());
  return run(device,
             make_call(
                 "orccl::all_reduce", kCollectives, signature(OpType::ALLREDUCE, opts.reduceOp.op_, &tensors.at(0)),
                 Args().add(tensors),
                 [gloo_opts](c10d::Backend& g, Cut& c) {
                   auto t = c.list();
                   return g.allreduce(t, gloo_opts);
                 },
                 finish),
             tensors, OpType::ALLREDUCE);
}

c10::intrusive_ptr<c10d::Work> Orccl::allreduce_coalesced(TensorList& tensors,
                                                          const c10d::AllreduceCoalescedOptions& opts) {
  auto device = device_of("all_reduce_coalesced", {&tensors});
  auto gloo_opts = opts;
  auto finish = to_gloo(gloo_opts, size_, tensors.size());
  return run(device,
             make_call(
                 "orccl::all_reduce_coalesced", kCollectives,
                 signature(OpType::ALLREDUCE_COALESCED, opts.reduceOp.op_, &tensors.at(0)), Args().add(tensors),
                 [gloo_opts](c10d::Backend& g, Cut& c) {
                   auto t = c.list();
                   return g.allreduce_coalesced(t, gloo_opts);
                 },
                 finish),
             tensors, OpType::ALLREDUCE_COALESCED);
}

c10::intrusive_ptr<c10d::Work> Orccl::reduce(TensorList& tensors, const c10d::ReduceOptions& opts) {
  auto device = device_of("reduce", {&tensors});
  auto gloo_opts = opts;
  auto finish = to_gloo(gloo_opts, size_, rank_ == opts.rootRank ? tensors.size() : 0);
  return run(device,
             make_call(
                 "orccl::reduce", kCollectives, signature(OpType::REDUCE, opts.reduceOp.op_, &tensors.at(0)),
                 Args().add(tensors),
                 [gloo_opts](c10d::Backend& g, Cut& c) {
                   auto t = c.list();
                   return g.reduce(t, gloo_opts);
                 },
                 finish),
             tensors, OpType::REDUCE);
}

c10::intrusive_ptr<c10d::Work> Orccl::allgather(TensorLists& outputs, TensorList& inputs,
                                                const c10d::AllgatherOptions& opts) {
  TensorList all = flatten(outputs);
  auto device = device_of("all_gather", {&inputs, &all});
  size_t n = outputs.size();
  return run(device,
             make_call("orccl::all_gather", kCollectives, signature(OpType::ALLGATHER, -1, &inputs.at(0)),
                       Args().add(outputs).add(inputs),
                       [opts, n](c10d::Backend& g, Cut& c) {
                         auto out = c.lists(n);
                         auto in = c.list();
                         return g.allgather(out, in, opts);
                       }),
             all, OpType::ALLGATHER);
}

c10::intrusive_ptr<c10d::Work> Orccl::allgather_coalesced(TensorLists& outputs, TensorList& inputs,
                                                          const c10d::AllgatherOptions& opts) {
  TensorList all = flatten(outputs);
  auto device = device_of("all_gather_coalesced", {&inputs, &all});
  size_t n = outputs.size();
  return run(device,
             make_call("orccl::all_gather_coalesced", kCollectives,
                       signature(OpType::ALLGATHER_COALESCED, -1, &inputs.at(0)), Args().add(outputs).add(inputs),
                       [opts, n](c10d::Backend& g, Cut& c) {
                         auto out = c.lists(n);
                         auto in = c.list();
                         return g.allgather_coalesced(out, in, opts);
                       }),
             all, OpType::ALLGATHER_COALESCED);
}

c10::intrusive_ptr<c10d::Work> Orccl::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::AllgatherOptions& opts) {
  TensorList out{output}, in{input};
  auto device = device_of("all_gather_into_tensor", {&out, &in});
  return run(device,
             make_call("orccl::all_gather_into_tensor", kCollectives, signature(OpType::_ALLGATHER_BASE, -1, &input),
                       Args().add(out).add(in),
                       [opts](c10d::Backend& g, Cut& c) {
                         auto o = c.one();
                         auto i = c.one();
                         return g._allgather_base(o, i, opts);
                       }),
             out, OpType::_ALLGATHER_BASE);
}

c10::intrusive_ptr<c10d::Work> Orccl::allgather_into_tensor_coalesced(TensorList& outputs, TensorList& inputs,
                                                                      const c10d::AllgatherOptions& opts) {
  auto device = device_of("all_gather_into_tensor_coalesced", {&outputs, &inputs});
  return run(device,
             make_call("orccl::all_gather_into_tensor_coalesced", kCollectives,
                       signature(OpType::COALESCED, -1, &inputs.at(0)), Args().add(outputs).add(inputs),
                       [opts](c10d::Backend& g, Cut& c) {
                         auto o = c.list();
                         auto i = c.list();
                         return g.allgather_into_tensor_coalesced(o, i, opts);
                       }),
             outputs, OpType::COALESCED);
}

c10::intrusive_ptr<c10d::Work> Orccl::gather(TensorLists& outputs, TensorList& inputs,
                                             const c10d::GatherOptions& opts) {
  TensorList all = flatten(outputs);
  auto device = device_of("gather", {&inputs, &all});
  size_t n = outputs.size();
  return run(device,
             make_call("orccl::gather", kCollectives, signature(OpType::GATHER, -1, &inputs.at(0)),
                       Args().add(outputs).add(inputs),
                       [opts, n](c10d::Backend& g, Cut& c) {
                         auto out = c.lists(n);
                         auto in = c.list();
                         return g.gather(out, in, opts);
                       }),
             all, OpType::GATHER);
}

c10::intrusive_ptr<c10d::Work> Orccl::scatter(TensorList& outputs, TensorLists& inputs,
                                              const c10d::ScatterOptions& opts) {
  TensorList all = flatten(inputs);
  auto device = device_of("scatter", {&outputs, &all});
  size_t n = inputs.size();
  return run(device,
             make_call("orccl::scatter", kCollectives, signature(OpType::SCATTER, -1, &outputs.at(0)),
                       Args().add(outputs).add(inputs),
                       [opts, n](c10d::Backend& g, Cut& c) {
                         auto out = c.list();
                         auto in = c.lists(n);
                         return g.scatter(out, in, opts);
                       }),
             outputs, OpType::SCATTER);
}

c10::intrusive_ptr<c10d::Work> Orccl::reduce_scatter(TensorList& outputs, TensorLists& inputs,
                                                     const c10d::ReduceScatterOptions& opts) {
  TensorList all = flatten(inputs);
  auto device = device_of("reduce_scatter", {&outputs, &all});
  size_t n = inputs.size();
  auto gloo_opts = opts;
  auto finish = to_gloo(gloo_opts, size_, outputs.size());
  return run(device,
             make_call(
                 "orccl::reduce_scatter", kCollectives,
                 signature(OpType::REDUCE_SCATTER, opts.reduceOp.op_, &outputs.at(0)), Args().add(outputs).add(inputs),
                 [gloo_opts, n](c10d::Backend& g, Cut& c) {
                   auto out = c.list();
                   auto in = c.lists(n);
                   return g.reduce_scatter(out, in, gloo_opts);
                 },
                 finish),
             outputs, OpType::REDUCE_SCATTER);
}

c10::intrusive_ptr<c10d::Work> Orccl::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                           const c10d::ReduceScatterOptions& opts) {
  TensorList out{output}, in{input};
  auto device = device_of("reduce_scatter_tensor", {&out, &in});
  auto gloo_opts = opts;
  auto finish = to_gloo(gloo_opts, size_, 1);
  return run(device,
             make_call(
                 "orccl::reduce_scatter_tensor", kCollectives,
                 signature(OpType::_REDUCE_SCATTER_BASE, opts.reduceOp.op_, &output), Args().add(out).add(in),
                 [gloo_opts](c10d::Backend& g, Cut& c) {
                   auto o = c.one();
                   auto i = c.one();
                   return g._reduce_scatter_base(o, i, gloo_opts);
                 },
                 finish),
             out, OpType::_REDUCE_SCATTER_BASE);
}

c10::intrusive_ptr<c10d::Work> Orccl::reduce_scatter_tensor_coalesced(TensorList& outputs, TensorList& inputs,
                                                                      const c10d::ReduceScatterOptions& opts) {
  auto device = device_of("reduce_scatter_tensor_coalesced", {&outputs, &inputs});
  auto gloo_opts = opts;
  auto finish = to_gloo(gloo_opts, size_, outputs.size());
  return run(device,
             make_call(
                 "orccl::reduce_scatter_tensor_coalesced", kCollectives,
                 signature(OpType::COALESCED, opts.reduceOp.op_, &outputs.at(0)), Args().add(outputs).add(inputs),
                 [gloo_opts](c10d::Backend& g, Cut& c) {
                   auto o = c.list();
                   auto i = c.list();
                   return g.reduce_scatter_tensor_coalesced(o, i, gloo_opts);
                 },
                 finish),
             outputs, OpType::COALESCED);
}

c10::intrusive_ptr<c10d::Work> Orccl::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                    std::vector<int64_t>& output_splits,
                                                    std::vector<int64_t>& input_splits,
                                                    const c10d::AllToAllOptions& opts) {
  TensorList out{output}, in{input};
  auto device = device_of("all_to_all_single", {&out, &in});
  return run(
      device,
      make_call("orccl::all_to_all_single", kCollectives, signature(OpType::ALLTOALL_BASE), Args().add(out).add(in),
                [opts, output_splits, input_splits](c10d::Backend& g, Cut& c) mutable {
                  auto o = c.one();
                  auto i = c.one();
                  return g.alltoall_base(o, i, output_splits, input_splits, opts);
                }),
      out, OpType::ALLTOALL_BASE);
}

c10::intrusive_ptr<c10d::Work> Orccl::alltoall(TensorList& outputs, TensorList& inputs,
                                               const c10d::AllToAllOptions& opts) {
  auto device = device_of("all_to_all", {&outputs, &inputs});
  return run(device,
             make_call("orccl::all_to_all", kCollectives, signature(OpType::ALLTOALL), Args().add(outputs).add(inputs),
                       [opts](c10d::Backend& g, Cut& c) {
                         auto o = c.list();
                         auto i = c.list();
                         return g.alltoall(o, i, opts);
                       }),
             outputs, OpType::ALLTOALL);
}

c10::intrusive_ptr<c10d::Work> Orccl::send(TensorList& tensors, int dst, int tag) {
  auto device = device_of("send", {&tensors});
  return run(device,
             make_call("orccl::send", kSends, {}, Args().add(tensors),
                       [dst, tag](c10d::Backend& g, Cut& c) {
                         auto t = c.list();
                         return g.send(t, dst, tag);
                       }),
             tensors, OpType::SEND);
}

c10::intrusive_ptr<c10d::Work> Orccl::recv(TensorList& tensors, int src, int tag) {
  auto device = device_of("recv", {&tensors});
  return run(device,
             make_call("orccl::recv", kRecvs, {}, Args().add(tensors),
                       [src, tag](c10d::Backend& g, Cut& c) {
                         auto t = c.list();
                         return g.recv(t, src, tag);
                       }),
             tensors, OpType::RECV);
}

c10::intrusive_ptr<c10d::Work> Orccl::recvAnysource(TensorList& tensors, int tag) {
  auto device = device_of("recv", {&tensors});
  return run(device,
             make_call("orccl::recv", kRecvs, {}, Args().add(tensors),
                       [tag](c10d::Backend& g, Cut& c) {
                         auto t = c.list();
                         return g.recvAnysource(t, tag);
                       }),
             tensors, OpType::RECVANYSOURCE);
}

c10::intrusive_ptr<c10d::Work> Orccl::barrier(const c10d::BarrierOptions& opts) {
  TensorList none;
  auto device = opts.device ? opts.device->index() : device_of("barrier", {&none});
  return run(device,
             make_call("orccl::barrier", kCollectives, signature(OpType::BARRIER), Args(),
                       [opts](c10d::Backend& g, Cut&) { return g.barrier(opts); }),
             none, OpType::BARRIER, /*barrier=*/true);
}

}  // namespace openreg::eager::distributed
