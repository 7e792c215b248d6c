#pragma once
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>

namespace openreg::glue {

// An openreg generator is a CPU (mt19937) generator that belongs to an openreg
// device, so CPU RNG kernels can draw from it on device memory.
struct Generator : at::CPUGeneratorImpl {
  explicit Generator(c10::DeviceIndex device);

 private:
  Generator* clone_impl() const override;
};

const at::Generator& default_generator(c10::DeviceIndex device);

}  // namespace openreg::glue
