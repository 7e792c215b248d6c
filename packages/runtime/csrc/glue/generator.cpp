// The openreg generator: CUDA's Philox state (seed, offset), drawn through
// CPU generators derived from it, since openreg runs the CPU's kernels.
#include "openreg/glue/generator.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/EmptyTensor.h>
#include <ATen/core/MT19937RNGEngine.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "openreg/core/detail/capture.h"
#include "openreg/core/device.h"
#include "openreg/core/graph.h"
#include "openreg/core/stream.h"
#include "openreg/glue/launch.h"

namespace openreg::glue {
namespace {

uint64_t mix(uint64_t z) {  // splitmix64's finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// mt19937's own seeding takes 32 bits; its whole state is filled from a
// splitmix64 stream keyed by both numbers instead. Not the CPU's engine for the
// seed, even at offset 0: an accelerator's numbers for a seed are its own, as
// CUDA's are.
at::mt19937 engine_for(uint64_t seed, uint64_t offset) {
  constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ULL;
  uint64_t x = mix(mix(seed) ^ offset);
  at::mt19937_data_pod data{};
  data.seed_ = seed;
  data.seeded_ = true;
  data.left_ = 1;
  data.next_ = 0;
  for (uint32_t& word : data.state_) word = static_cast<uint32_t>(mix(x += kGamma) >> 32);
  at::mt19937 engine;
  engine.set_data(data);
  return engine;
}

}  // namespace

struct Generator::State {
  uint64_t seed;
  uint64_t offset = 0;
  std::shared_ptr<InCapture> capture;
};

struct Generator::InCapture {
  // The core's capture: held weakly, since a later one may take its address.
  std::weak_ptr<detail::Capture> capture;
  uint64_t offset = 0;   // what the next captured launch takes
  uint64_t reached = 0;  // the whole graph's draws
  uint64_t base = 0;     // the generator's offset when the replay began
};

Generator::InCapture* Generator::capturing() const {
  detail::Capture* now = openreg::current_stream(device().index()).capture();
  const std::shared_ptr<InCapture>& capture = state_->capture;
  return now != nullptr && capture != nullptr && capture->capture.lock().get() == now ? capture.get() : nullptr;
}

void Generator::begin_capture() {
  std::lock_guard<std::mutex> lock(mutex_);
  detail::Capture* now = openreg::current_stream(device().index()).capture();
  if (now != nullptr) state_->capture = std::make_shared<InCapture>(InCapture{now->weak_from_this()});
}

uint64_t& Generator::offset() const {
  InCapture* c = capturing();
  return c != nullptr ? c->offset : state_->offset;
}

Generator::Generator(c10::DeviceIndex device, uint64_t seed)
    : Generator(device, std::make_shared<State>(State{seed})) {}

Generator::Generator(c10::DeviceIndex device, std::shared_ptr<State> state)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      state_(std::move(state)) {}

void Generator::set_current_seed(uint64_t seed) {
  // As CUDA's: a capture's replays take the offset then, so seeding mid-capture may only repeat the seed, and
  // leaves the offset alone.
  if (capturing() != nullptr) {
    TORCH_CHECK(seed == state_->seed, "openreg's Generator::set_current_seed can be called during stream capture ",
                "only if new seed is the same as the original seed (", state_->seed, "; got ", seed, ").");
    return;
  }
  state_->seed = seed;
  state_->offset = 0;
}

void Generator::set_offset(uint64_t offset) {
  TORCH_CHECK(offset % 4 == 0, "offset must be a multiple of 4");  // CUDA's check and words
  this->offset() = offset;
}

uint64_t Generator::get_offset() const { return offset(); }
uint64_t Generator::current_seed() const { return state_->seed; }

uint64_t Generator::seed() {
  const uint64_t random = c10::detail::getNonDeterministicRandom(true);
  set_current_seed(random);
  return random;
}

// CUDA's layout: the seed, then the offset, 8 bytes each; a state of the seed
// alone (what older releases saved) means offset 0.
c10::intrusive_ptr<c10::TensorImpl> Generator::get_state() const {
  // Made outside the dispatcher, as the CPU's and CUDA's generators make theirs: a fake-tensor mode active
  // (torch.compile's RNG state functions) would make it a tensor without data.
  at::Tensor state =
      at::detail::empty_cpu({2 * sizeof(uint64_t)}, at::kByte, std::nullopt, std::nullopt, std::nullopt, std::nullopt);
  const uint64_t offset = get_offset();
  std::memcpy(state.data_ptr<uint8_t>(), &state_->seed, sizeof(uint64_t));
  std::memcpy(state.data_ptr<uint8_t>() + sizeof(uint64_t), &offset, sizeof(uint64_t));
  return state.getIntrusivePtr();
}

void Generator::set_state(const c10::TensorImpl& new_state) {
  at::detail::check_rng_state(new_state);
  const auto size = static_cast<size_t>(new_state.numel());
  TORCH_CHECK(size == 2 * sizeof(uint64_t) || size == sizeof(uint64_t), "RNG state is wrong size");
  const auto* bytes = new_state.data_dtype_initialized<uint8_t>();
  uint64_t seed = 0, offset = 0;
  std::memcpy(&seed, bytes, sizeof(uint64_t));
  if (size == 2 * sizeof(uint64_t)) std::memcpy(&offset, bytes + sizeof(uint64_t), sizeof(uint64_t));
  TORCH_CHECK(capturing() == nullptr || seed == state_->seed, "openreg's Generator::set_state can be called during ",
              "stream capture only with the seed the generator has (", state_->seed, "; got ", seed, ").");
  set_offset(offset);  // checked before anything changes
  state_->seed = seed;
}

namespace {

at::Generator cpu_generator(uint64_t seed, uint64_t offset) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  gen.get<at::CPUGeneratorImpl>()->set_engine(engine_for(seed, offset));
  return gen;
}

}  // namespace

at::Generator Generator::take_launch() {
  std::lock_guard<std::mutex> lock(mutex_);
  at::Generator launch = cpu_generator(state_->seed, state_->offset);
  state_->offset += kLaunchIncrement;
  return launch;
}

Generator::Captured Generator::take_captured() {
  std::lock_guard<std::mutex> lock(mutex_);
  InCapture* c = capturing();
  // CUDA's check and words: a replay moves on only the states its graph registered.
  TORCH_CHECK(c != nullptr,
              "Attempt to increase offset for an openreg generator not in capture mode. A graph captures random "
              "numbers from its device's default generator and from the generators registered with it: call "
              "graph.register_generator_state(generator) before capture_begin().");
  const Captured launch{state_, state_->capture, c->offset, c->reached == 0};
  c->offset += kLaunchIncrement;
  c->reached = std::max(c->reached, c->offset);
  return launch;
}

at::Generator Generator::take_replayed(const Captured& launch) {
  std::lock_guard<std::mutex> lock(mutex_);
  // The graph's first launch from a state begins the replay: the ones after it draw from where it was then.
  State& state = *launch.state;
  if (launch.first) {
    launch.capture->base = state.offset;
    state.offset += launch.capture->reached;
  }
  return cpu_generator(state.seed, launch.capture->base + launch.offset);
}

c10::intrusive_ptr<c10::GeneratorImpl> Generator::graphsafe_get_state() const {
  return c10::make_intrusive<Generator>(device_.index(), state_);
}

void Generator::graphsafe_set_state(const c10::intrusive_ptr<c10::GeneratorImpl>& state) {
  auto* other = dynamic_cast<Generator*>(state.get());
  TORCH_CHECK(other != nullptr,
              "graphsafe_set_state of an openreg generator takes an openreg generator's state "
              "(graphsafe_get_state() or clone_state() of one), not one on ",
              state->device());
  state_ = other->state_;
}

Generator* Generator::clone_impl() const {
  return new Generator(device_.index(), std::make_shared<State>(State{state_->seed, state_->offset}));
}

const at::Generator& default_generator(c10::DeviceIndex device) {
  static std::once_flag once;
  static std::vector<at::Generator> generators;
  std::call_once(once, [] {
    for (int d = 0; d < device_count(); ++d) generators.push_back(at::make_generator<Generator>(d));
  });
  checked([&] { check_device(device < 0 ? current_device() : device); });
  return generators[device < 0 ? current_device() : device];
}

}  // namespace openreg::glue
