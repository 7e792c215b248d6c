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

struct Generator::InCapture {
  const void* id;        // the core's capture
  uint64_t offset = 0;   // what the next captured launch takes
  uint64_t reached = 0;  // the whole graph's draws
  uint64_t base = 0;     // the generator's offset when the replay began
};

Generator::InCapture* Generator::capturing() {
  const void* id = openreg::current_stream(device().index()).capture();
  if (id == nullptr) return nullptr;
  if (capture_ == nullptr || capture_->id != id) capture_ = std::make_shared<InCapture>(InCapture{id});
  return capture_.get();
}

uint64_t& Generator::offset() {
  InCapture* c = capturing();
  return c != nullptr ? c->offset : offset_;
}

Generator::Generator(c10::DeviceIndex device, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      seed_(seed) {}

void Generator::set_current_seed(uint64_t seed) {
  // As CUDA's: a capture's replays take the offset then, so seeding mid-capture may only repeat the seed, and
  // leaves the offset alone.
  if (capturing() != nullptr) {
    TORCH_CHECK(seed == seed_, "openreg's Generator::set_current_seed can be called during stream capture only if ",
                "new seed is the same as the original seed (", seed_, "; got ", seed, ").");
    return;
  }
  seed_ = seed;
  offset_ = 0;
}

void Generator::set_offset(uint64_t offset) {
  TORCH_CHECK(offset % 4 == 0, "offset must be a multiple of 4");  // CUDA's check and words
  this->offset() = offset;
}

uint64_t Generator::get_offset() const { return const_cast<Generator*>(this)->offset(); }
uint64_t Generator::current_seed() const { return seed_; }

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
  std::memcpy(state.data_ptr<uint8_t>(), &seed_, sizeof(uint64_t));
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
  TORCH_CHECK(capturing() == nullptr || seed == seed_, "openreg's Generator::set_state can be called during stream ",
              "capture only with the seed the generator has (", seed_, "; got ", seed, ").");
  set_offset(offset);  // checked before anything changes
  seed_ = seed;
}

at::Generator Generator::take_launch() {
  std::lock_guard<std::mutex> lock(mutex_);
  at::Generator launch = at::make_generator<at::CPUGeneratorImpl>(seed_);
  launch.get<at::CPUGeneratorImpl>()->set_engine(engine_for(seed_, offset_));
  offset_ += kLaunchIncrement;
  return launch;
}

Generator::Captured Generator::take_captured() {
  std::lock_guard<std::mutex> lock(mutex_);
  InCapture* c = capturing();
  TORCH_INTERNAL_ASSERT(c != nullptr, "take_captured() outside a capture");
  const Captured launch{capture_, c->offset, c->reached == 0};
  c->offset += kLaunchIncrement;
  c->reached = std::max(c->reached, c->offset);
  return launch;
}

at::Generator Generator::take_replayed(const Captured& launch) {
  std::lock_guard<std::mutex> lock(mutex_);
  // The graph's first launch begins the replay: the ones after it draw from where the generator was then.
  if (launch.first) {
    launch.capture->base = offset_;
    offset_ += launch.capture->reached;
  }
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed_);
  gen.get<at::CPUGeneratorImpl>()->set_engine(engine_for(seed_, launch.capture->base + launch.offset));
  return gen;
}

Generator* Generator::clone_impl() const {
  auto* copy = new Generator(device_.index(), seed_);
  copy->offset_ = offset_;
  return copy;
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
