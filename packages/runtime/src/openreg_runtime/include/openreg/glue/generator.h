#pragma once
#include <ATen/core/Generator.h>

#include <cstdint>
#include <memory>

namespace openreg::glue {

// An openreg generator has CUDA's Philox state: a seed and an offset that each
// launch advances (get_state() is CUDA's 16 bytes, get_offset()/set_offset()
// work, torch.distributed.tensor's offset arithmetic applies). The kernels are
// the CPU's, so each launch draws from a CPU (mt19937) generator whose state is
// derived from (seed, offset): every pair its own stream, as Philox's counters
// are.
struct Generator : c10::GeneratorImpl {
  // What one launch consumes, as CUDA's kernels round their offset increments.
  static constexpr uint64_t kLaunchIncrement = 4;

  explicit Generator(c10::DeviceIndex device, uint64_t seed = c10::default_rng_seed_val);
  struct State;
  Generator(c10::DeviceIndex device, std::shared_ptr<State> state);  // sharing `state`

  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  // As CUDA's: a generator sharing this one's state (its seed, offset and
  // capture), and taking another's; clone_state() copies it.
  c10::intrusive_ptr<c10::GeneratorImpl> graphsafe_get_state() const override;
  void graphsafe_set_state(const c10::intrusive_ptr<c10::GeneratorImpl>& state) override;

  // The CPU generator for the next launch's numbers; moves the offset on.
  // Takes mutex_, as torch's own calls on a generator do.
  at::Generator take_launch();

  // A launch captured in a graph takes an offset relative to the replay's
  // (CUDA's offset_intragraph): each replay adds it to the offset it finds, and
  // moves that on by the whole graph's draws. While its device's current stream
  // captures, get_state()/set_state() and get_offset()/set_offset() read and write
  // the capture's offset, so a state saved and restored there (checkpoint's
  // recompute) draws the same numbers at each replay.
  struct InCapture;
  struct Captured {
    std::shared_ptr<State> state;  // the one drawn from, whichever the generator has at replay
    std::shared_ptr<InCapture> capture;
    uint64_t offset;  // relative to the replay's
    bool first;       // the state's first launch in the capture, which begins each replay
  };
  // Registers the state with the capture underway on the generator's device,
  // if any (CUDA's capture_prologue); a capture draws only from states
  // registered with it.
  void begin_capture();
  Captured take_captured();
  // At a replay, the CPU generator for a launch `take_captured()` recorded.
  at::Generator take_replayed(const Captured& launch);

 private:
  Generator* clone_impl() const override;
  // The capture now underway on this generator's device, if the state is
  // registered with it; else nullptr. Under mutex_.
  InCapture* capturing() const;
  uint64_t& offset() const;  // the capture's while one is underway

  std::shared_ptr<State> state_;
};

const at::Generator& default_generator(c10::DeviceIndex device);

}  // namespace openreg::glue
