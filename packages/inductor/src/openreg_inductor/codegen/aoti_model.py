"""The AOTInductor model for openreg: the generated constructor ends by calling
`openreg_inductor::claim_device` (include/openreg_inductor/aoti_model.h, which says why)."""

from __future__ import annotations

from .splices import replace_once

HEADER = "openreg_inductor/aoti_model.h"

# The last statement torch generates in the constructor's body.
_BODY_END = "this->kernels_ = std::make_unique<AOTInductorModelKernels>();"

# The members it passes are protected ones of torch's model base class.
_CLAIM_DEVICE = ("openreg_inductor::claim_device(*this, device_type_, device_idx_, include_weights, constants_map_, "
                 "[this] { return _get_constants_start(); });")


def constructor(code: str) -> str:
    """Inductor's generated model constructor `code`, made an openreg one."""
    return replace_once(code, _BODY_END, f"{_BODY_END}\n    {_CLAIM_DEVICE}",
                        "openreg cannot make an AOTInductor model run on its device")
