#pragma once
// What an AOTInductor model for openreg does differently from torch's model runtime (aoti_runtime/model_base.h), done
// at the end of its generated constructor (codegen/aoti_model.py).
//
// That runtime parses only "cpu|cuda|xpu|mps[:N]" device strings, and its non-CUDA builds load a model's constants
// into a malloc'd host blob, which PyTorch refuses to wrap as openreg tensors (the memory is not the device's).
// openreg's runner hands the model "cpu[:N]"; the constructor then claims openreg:N (no N: the current device) and
// loads the embedded constants itself, into device memory, before the container would load them.
#include <openreg_inductor/launch.h>
#include <torch/csrc/inductor/aoti_runtime/model_base.h>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace openreg_inductor {

// `model`'s embedded constants (`bytes`, laid out as torch's runtime reads them) as tensors in `map`:
// openreg ones copied into device memory on `device`, CPU ones cloned into host memory.
template <class Model>
void load_constants(Model& model, uint8_t* bytes, torch::aot_inductor::ConstantMap& map, int32_t device) {
  using torch::aot_inductor::RAIIAtenTensorHandle;
  for (size_t i = 0, read = 0; i < model.num_constants(); ++i) {
    if (model.constant_from_folded(i)) continue;
    const auto ndim = model.constant_ndim(i);
    const auto* shape = model.constant_shape(i);
    const auto* stride = model.constant_stride(i);
    const auto dtype = model.constant_dtype(i);
    AtenTensorHandle view = nullptr, held = nullptr;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_create_tensor_from_blob(
        bytes + read, ndim, shape, stride, model.constant_offset(i), dtype, aoti_torch_device_type_cpu(), 0, &view));
    RAIIAtenTensorHandle owned_view(view);
    read += model.constant_data_size(i);
    if (model.constant_device_type(i) == aoti_torch_device_type_cpu()) {
      AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_clone_preserve_strides(view, &held));
    } else {
      AOTI_TORCH_ERROR_CODE_CHECK(
          aoti_torch_empty_strided(ndim, shape, stride, dtype, aoti_torch_device_type_privateuse1(), device, &held));
      AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_copy_(held, view, 0));
    }
    map.emplace(model.constant_name(i), held);
  }
}

// The end of the generated constructor of `model`, which passes in its protected members: the model runs on openreg
// (`device_idx`: negative for the current device), and the first model of a container (its models share `constants`)
// loads the embedded constants, from constants_start(). Clearing `include_weights` keeps the container from loading
// them again.
template <class Model, class ConstantsStart>
void claim_device(Model& model, int32_t& device_type, int32_t& device_idx, bool& include_weights,
                  const std::shared_ptr<torch::aot_inductor::ConstantMap>& constants, ConstantsStart constants_start) {
  device_type = aoti_torch_device_type_privateuse1();
  device_idx = DeviceGuard::current(device_idx);
  if (include_weights && constants->empty()) {
    load_constants(model, constants_start(), *constants, device_idx);
    model.update_constants_array_from_map();
  }
  include_weights = false;
}

}  // namespace openreg_inductor
