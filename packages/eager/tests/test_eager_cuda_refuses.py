"""Dtypes the CPU computes where CUDA has no kernel (csrc/generic/cuda_refuses.cpp): openreg refuses them at the
call, as CUDA does, so that code which passes on the CPU and fails on CUDA fails on openreg too (an integer matmul).
The reference is OpInfo's own dtype lists: each case's dtype is one OpInfo does not list for CUDA, and the CPU
computes the case."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close
from torch.testing._internal.common_methods_invocations import op_db

import openreg_eager  # noqa: F401  (registers the openreg kernels)


def _t(*shape, dtype, device):
    return (torch.arange(1, 1 + torch.Size(shape).numel()) % 7).reshape(shape).to(device=device, dtype=dtype)


# (OpInfo name, variant, dtype, call(dtype, device))
CASES = {
    "mm": ("mm", "", torch.int64, lambda dt, d: torch.mm(_t(3, 4, dtype=dt, device=d), _t(4, 2, dtype=dt, device=d))),
    "addmm": ("addmm", "", torch.int32, lambda dt, d: torch.addmm(_t(3, 2, dtype=dt, device=d),
                                                                   _t(3, 4, dtype=dt, device=d),
                                                                   _t(4, 2, dtype=dt, device=d))),
    "bmm": ("bmm", "", torch.int16, lambda dt, d: torch.bmm(_t(2, 3, 4, dtype=dt, device=d),
                                                             _t(2, 4, 2, dtype=dt, device=d))),
    "baddbmm": ("baddbmm", "", torch.uint8, lambda dt, d: torch.baddbmm(_t(2, 3, 2, dtype=dt, device=d),
                                                                         _t(2, 3, 4, dtype=dt, device=d),
                                                                         _t(2, 4, 2, dtype=dt, device=d))),
    "addbmm": ("addbmm", "", torch.int8, lambda dt, d: torch.addbmm(_t(3, 2, dtype=dt, device=d),
                                                                     _t(2, 3, 4, dtype=dt, device=d),
                                                                     _t(2, 4, 2, dtype=dt, device=d))),
    "mv": ("mv", "", torch.int64, lambda dt, d: torch.mv(_t(3, 4, dtype=dt, device=d), _t(4, dtype=dt, device=d))),
    "dot": ("dot", "", torch.int64, lambda dt, d: torch.dot(_t(4, dtype=dt, device=d), _t(4, dtype=dt, device=d))),
    "vdot": ("vdot", "", torch.int32, lambda dt, d: torch.vdot(_t(4, dtype=dt, device=d), _t(4, dtype=dt, device=d))),
    "matmul": ("matmul", "", torch.int64, lambda dt, d: _t(2, 3, 4, dtype=dt, device=d) @ _t(4, 2, dtype=dt, device=d)),
    "linear": ("nn.functional.linear", "", torch.int64, lambda dt, d: F.linear(_t(3, 4, dtype=dt, device=d),
                                                                                _t(2, 4, dtype=dt, device=d))),
    "conv1d": ("nn.functional.conv1d", "", torch.int64, lambda dt, d: F.conv1d(_t(1, 2, 6, dtype=dt, device=d),
                                                                                _t(3, 2, 3, dtype=dt, device=d))),
    # OpInfo lists int64 alone for the CPU, which computes every integer convolution but dilated ones.
    "conv2d int32": ("nn.functional.conv2d", "", torch.int32, lambda dt, d: F.conv2d(
        _t(1, 2, 4, 4, dtype=dt, device=d), _t(3, 2, 3, 3, dtype=dt, device=d))),
    "bilinear": ("nn.functional.bilinear", "", torch.int32, lambda dt, d: F.bilinear(
        _t(2, 3, dtype=dt, device=d), _t(2, 4, dtype=dt, device=d), _t(5, 3, 4, dtype=dt, device=d))),
    "native_dropout_backward": ("native_dropout_backward", "", torch.bool, lambda dt, d: (
        torch.ops.aten.native_dropout_backward(_t(4, dtype=dt, device=d), _t(4, dtype=torch.bool, device=d), 2.0))),
    **{f"scatter_reduce {reduce}": ("scatter_reduce", reduce, torch.bool, lambda dt, d, reduce=reduce: (
        _t(3, dtype=dt, device=d).scatter_reduce(0, torch.tensor([0, 2, 0, 1], device=d), _t(4, dtype=dt, device=d),
                                                 reduce))) for reduce in ("prod", "amax", "amin")},
    "conv_transpose2d": ("nn.functional.conv_transpose2d", "", torch.int64,
                         lambda dt, d: F.conv_transpose2d(_t(1, 2, 4, 4, dtype=dt, device=d),
                                                          _t(2, 3, 3, 3, dtype=dt, device=d))),
    "max_pool2d": ("nn.functional.max_pool2d", "", torch.int32,
                   lambda dt, d: F.max_pool2d(_t(1, 2, 4, 4, dtype=dt, device=d), 2)),
    "max_pool3d": ("nn.functional.max_pool3d", "", torch.uint8,
                   lambda dt, d: F.max_pool3d(_t(1, 2, 4, 4, 4, dtype=dt, device=d), 2, return_indices=True)[0]),
    "avg_pool2d": ("nn.functional.avg_pool2d", "", torch.int64,
                   lambda dt, d: F.avg_pool2d(_t(1, 2, 4, 4, dtype=dt, device=d), 2)),
    "avg_pool1d": ("nn.functional.avg_pool1d", "", torch.int64,
                   lambda dt, d: F.avg_pool1d(_t(1, 2, 4, dtype=dt, device=d), 2)),
    "bilinear upsampling": ("nn.functional.interpolate", "bilinear", torch.uint8,
                            lambda dt, d: F.interpolate(_t(1, 2, 4, 4, dtype=dt, device=d), scale_factor=2,
                                                        mode="bilinear")),
    "bicubic upsampling": ("nn.functional.interpolate", "bicubic", torch.uint8,
                           lambda dt, d: F.interpolate(_t(1, 2, 4, 4, dtype=dt, device=d), scale_factor=2,
                                                       mode="bicubic")),
    "antialiased bilinear": ("_upsample_bilinear2d_aa", "", torch.uint8,
                             lambda dt, d: torch._C._nn._upsample_bilinear2d_aa(
                                 _t(1, 2, 4, 4, dtype=dt, device=d), None, False, [2.0, 2.0])),
    # PyTorch's test_nn.py::test_upsamplingBiMode2d_nonsupported_dtypes expects it of every device but the CPU
    "antialiased bicubic": ("nn.functional.interpolate", "bicubic", torch.uint8,
                            lambda dt, d: F.interpolate(_t(1, 2, 4, 4, dtype=dt, device=d), scale_factor=2,
                                                        mode="bicubic", antialias=True)),
    "igamma": ("igamma", "", torch.float16, lambda dt, d: torch.igamma(_t(4, dtype=dt, device=d),
                                                                        _t(4, dtype=dt, device=d))),
    "igammac": ("igammac", "", torch.bfloat16, lambda dt, d: torch.igammac(_t(4, dtype=dt, device=d),
                                                                            _t(4, dtype=dt, device=d))),
    **({"angle": ("angle", "", torch.float16, lambda dt, d: torch.angle(_t(4, dtype=dt, device=d) - 3))}
       if torch.__version__ < "2.14" else {}),  # torch 2.14's CUDA angle computes float16
    "histc": ("histc", "", torch.bfloat16, lambda dt, d: torch.histc(_t(8, dtype=dt, device=d), 4)),
    "histogram": ("histogram", "", torch.float32, lambda dt, d: torch.histogram(_t(8, dtype=dt, device=d), 3)[0]),
    "histogramdd": ("histogramdd", "", torch.float64,
                    lambda dt, d: torch.histogramdd(_t(8, 2, dtype=dt, device=d), [2, 2])[0]),
}


def _opinfo(name, variant):
    (op,) = [op for op in op_db if op.name == name and op.variant_test_name == variant]
    return op


@pytest.mark.parametrize("case", CASES)
def test_a_dtype_cuda_has_no_kernel_for_is_refused_at_the_call(case):
    name, variant, dtype, call = CASES[case]
    op = _opinfo(name, variant)
    assert dtype not in op.supported_dtypes("cuda")
    call(dtype, "cpu")  # the CPU computes it
    with pytest.raises(NotImplementedError, match=r"not implemented for '\w+' on CUDA, which has no kernel for it"):
        call(dtype, "openreg")
    torch.openreg.synchronize()  # nothing was left to fail later


@pytest.mark.parametrize("case", [c for c in CASES if not c.startswith("histogram")])
def test_the_dtypes_cuda_computes_are_computed(case):
    _, _, _, call = CASES[case]
    assert_close(call(torch.float32, "openreg").cpu(), call(torch.float32, "cpu"))


@pytest.mark.parametrize("reduce", ["sum", "prod", "amax", "amin"])
def test_a_refusal_that_depends_on_the_reduction_leaves_the_others_computed(reduce):
    """CUDA's scatter_reduce takes bool for a sum (OpInfo lists it), and every reduction of the other dtypes."""
    dtype = torch.bool if reduce == "sum" else torch.int16
    assert dtype in _opinfo("scatter_reduce", reduce).supported_dtypes("cuda")
    index = torch.tensor([[0, 2], [1, 1]])
    self, src = torch.tensor([[1, 0, 3], [0, 2, 2]]).to(dtype), torch.tensor([[4, 5], [0, 6]]).to(dtype)
    got = self.to("openreg").scatter_reduce(1, index.to("openreg"), src.to("openreg"), reduce)
    assert torch.equal(got.cpu(), self.scatter_reduce(1, index, src, reduce))


@pytest.mark.parametrize(("mode", "dtype"), [("max", torch.bfloat16), ("sum", torch.bfloat16), ("mean", torch.bfloat16),
                                           ("max", torch.float16)])
def test_embedding_bags_max_gradient_is_refused_in_bfloat16_alone(mode, dtype):
    """CUDA's EmbeddingBag backward takes bfloat16 for a sum or mean but not for a max (OpInfo's note and CUDA
    backward dtypes)."""
    assert torch.bfloat16 not in _opinfo("nn.functional.embedding_bag", "").supported_backward_dtypes("cuda")

    def grad(d):
        weight = _t(6, 3, dtype=dtype, device=d).requires_grad_()
        index, offsets = torch.tensor([1, 2, 4, 5, 0], device=d), torch.tensor([0, 2], device=d)
        F.embedding_bag(index, weight, offsets, mode=mode).sum().backward()
        return weight.grad

    expected = grad("cpu")
    if mode == "max" and dtype == torch.bfloat16:
        with pytest.raises(NotImplementedError, match=r"not implemented for 'BFloat16' on CUDA, which has no kernel"):
            grad("openreg")
        torch.openreg.synchronize()
    else:
        assert torch.equal(grad("openreg").cpu(), expected)


def _q(d):
    return torch.quantize_per_tensor(torch.linspace(-1, 1, 12, device=d).reshape(3, 4), 0.05, 3, torch.quint8)


# Kernels CUDA has none of (csrc/generic/cuda_lacks.cpp): (the op, its dispatch key without the backend, a call)
NO_KERNEL_CASES = {
    "nested sum over a dimension": ("aten::sum.dim_IntList", "NestedTensor", lambda d: torch.nested.nested_tensor(
        [torch.ones(2, 3), torch.ones(1, 3)], device=d).sum(-1, keepdim=True)),
    "CSR sparse.mm with a reduction": ("aten::_sparse_mm_reduce_impl", "SparseCsr", lambda d: torch.sparse.mm(
        torch.eye(3, device=d).to_sparse_csr(), torch.ones(3, 2, device=d), "sum")),
    "to_mkldnn": ("aten::to_mkldnn", "", lambda d: torch.ones(2, 2, device=d).to_mkldnn()),
    "_add_relu": ("aten::_add_relu.Tensor", "", lambda d: torch.ops.aten._add_relu(*[torch.ones(2, device=d)] * 2)),
    "slow_conv3d, whose composite kernel calls it": ("aten::slow_conv3d_forward", "", lambda d: (
        torch.ops.aten.slow_conv3d(torch.ones(1, 1, 3, 3, 3, device=d), torch.ones(1, 1, 2, 2, 2, device=d), [2] * 3))),
    "dynamic quantization's linear": ("quantized::linear_dynamic", "", lambda d: (
        torch.ao.nn.quantized.dynamic.Linear(4, 3)(torch.ones(2, 4, device=d)))),
    "from_file": ("aten::from_file", "", lambda d: torch.from_file(__file__, size=4, dtype=torch.uint8, device=d)),
    "MKL-DNN's fused linear": ("mkldnn::_linear_pointwise", "", lambda d: torch.ops.mkldnn._linear_pointwise(
        torch.ones(2, 4, device=d), torch.ones(3, 4, device=d), None, "none", [], "")),
    "the CPU's flash attention": ("aten::_scaled_dot_product_flash_attention_for_cpu", "", lambda d: (
        torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(*[torch.ones(1, 1, 2, 4, device=d)] * 3))),
    "quantize a list": ("aten::quantize_per_tensor.tensors", "", lambda d: torch.quantize_per_tensor(
        [torch.ones(2, device=d)], torch.tensor([0.1], device=d), torch.tensor([0], device=d), torch.quint8)),
    "narrow_copy into an out": ("aten::narrow_copy.out", "", lambda d: torch.narrow_copy(
        torch.ones(3, device=d), 0, 0, 2, out=torch.empty(2, device=d))),
    "quantized::mul": ("quantized::mul", "Quantized", lambda d: torch.ops.quantized.mul(_q(d), _q(d), 0.1, 0)),
    "quantized::cat": ("quantized::cat", "Quantized", lambda d: torch.ops.quantized.cat([_q(d), _q(d)], 0, 0.1, 0)),
    "equal": ("aten::equal", "Quantized", lambda d: torch.equal(_q(d), _q(d))),
    "max": ("aten::max", "Quantized", lambda d: _q(d).max()),
    "hardtanh": ("aten::hardtanh", "Quantized", lambda d: F.hardtanh(_q(d))),
    "std": ("aten::std.correction", "Quantized", lambda d: _q(d).std()),
    "resize_": ("aten::resize_", "Quantized", lambda d: _q(d).resize_(2, 6)),
    "dequantize of a list": ("aten::dequantize.tensors", "Quantized", lambda d: torch.dequantize([_q(d), _q(d)])),
    "eq into an out": ("aten::eq.Tensor_out", "Quantized", lambda d: torch.eq(
        _q(d), _q(d), out=torch.empty(3, 4, dtype=torch.bool, device=d))),
}


@pytest.mark.filterwarnings("ignore::UserWarning")  # the strided nested API is a prototype; quantized dtypes deprecated
@pytest.mark.parametrize("case", NO_KERNEL_CASES)
def test_a_kernel_cuda_lacks_is_refused_at_the_call(case):
    op, key, call = NO_KERNEL_CASES[case]
    if torch._C._dispatch_has_kernel_for_dispatch_key("aten::mm", "CUDA"):  # a CUDA build's dispatcher knows
        has = torch._C._dispatch_has_computed_kernel_for_dispatch_key
        assert has(op, f"{key}CPU") and not has(op, f"{key}CUDA")
    call("cpu")  # the CPU computes it
    with pytest.raises(NotImplementedError, match=re.escape(
            f"Could not run '{op}' with arguments from the '{key}PrivateUse1' backend. CUDA has no kernel")):
        call("openreg")
    torch.openreg.synchronize()  # nothing was left to fail later
