"""What an AOTInductor model for openreg does differently from torch's model runtime
(aoti_runtime/model_base.h, compiled into every model), spliced into its generated constructor.

That runtime parses only "cpu|cuda|xpu|mps[:N]" device strings, and its non-CUDA builds load a model's
constants into a malloc'd host blob, which PyTorch refuses to wrap as openreg tensors (the memory is not
the device's). openreg's runner (openreg_eager, csrc/aoti/runner.cpp) therefore hands the model
"cpu[:N]"; the constructor then claims openreg:N (no N: the current device) and loads the embedded
constants itself, into device memory, before the container would load them.
"""

from __future__ import annotations

import textwrap

HELPERS = r"""
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
}  // namespace openreg_inductor
"""

# Appended to the generated constructor's body. Models of one container share one constant map: the first
# fills it. `include_weights = false` keeps the container from loading the constants again.
_CONSTRUCTOR_TAIL = r"""device_type_ = aoti_torch_device_type_privateuse1();
device_idx_ = openreg_inductor::DeviceGuard::current(device_idx_);
if (include_weights && constants_map_->empty()) {
    openreg_inductor::load_constants(*this, _get_constants_start(), *constants_map_, device_idx_);
    update_constants_array_from_map();
}
include_weights = false;"""

# The last statement torch generates in the constructor's body.
_BODY_END = "this->kernels_ = std::make_unique<AOTInductorModelKernels>();"


def constructor(code: str) -> str:
    """Inductor's generated model constructor `code`, made an openreg one."""
    if code.count(_BODY_END) != 1:
        raise RuntimeError("openreg-inductor does not know this torch's AOTInductor model constructor: install the "
                           "openreg release built for this torch")
    return code.replace(_BODY_END, _BODY_END + "\n" + textwrap.indent(_CONSTRUCTOR_TAIL, "    "))
