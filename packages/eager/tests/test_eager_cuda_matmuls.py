"""Matmuls where CUDA's contract differs from the CPU's kernels.

mm, bmm, addmm and baddbmm with `out_dtype` (kernels/matmul_out_dtype.cpp): CUDA multiplies float16 and bfloat16
matrices into a float32 result, accumulating in float32; the CPU has no kernel for these overloads. The reference is
the CPU's matmul of the operands read in float32 (the result's dtype), with CUDA's checks and messages.

torch._int_mm (kernels/int_mm.cpp): CUDA's int8 matmul refuses shapes cuBLASLt cannot tile, which the CPU's takes;
the values of the shapes both take are the CPU's."""

from __future__ import annotations

import pytest
import torch

import openreg_eager  # noqa: F401  (registers the openreg kernels)

_g = torch.Generator().manual_seed(0)
_a, _b, _bias = torch.randn(5, 7, generator=_g), torch.randn(7, 3, generator=_g), torch.randn(5, 3, generator=_g)
_b1, _b2, _bbias = (torch.randn(2, 5, 7, generator=_g), torch.randn(2, 7, 3, generator=_g),
                    torch.randn(2, 5, 3, generator=_g))

# name -> (operands, call with out_dtype and optional out=, the same computation without out_dtype)
CALLS = {
    "mm": ((_a, _b), lambda a, b, **kw: torch.mm(a, b, **kw), torch.mm),
    "addmm": ((_bias, _a, _b), lambda s, a, b, **kw: torch.addmm(s, a, b, beta=0.5, alpha=2, **kw),
              lambda s, a, b: torch.addmm(s, a, b, beta=0.5, alpha=2)),
    "bmm": ((_b1, _b2), lambda a, b, **kw: torch.bmm(a, b, **kw), torch.bmm),
    "baddbmm": ((_bbias, _b1, _b2), lambda s, a, b, **kw: torch.baddbmm(s, a, b, beta=0.5, **kw),
                lambda s, a, b: torch.baddbmm(s, a, b, beta=0.5)),
}


def _on(device, operands, dtype):
    return [t.to(device=device, dtype=dtype) for t in operands]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", CALLS)
def test_half_precision_operands_multiply_into_float32_as_on_cuda(name, dtype):
    operands, call, plain = CALLS[name]
    expected = plain(*[t.float() for t in _on("cpu", operands, dtype)])
    result = call(*_on("openreg", operands, dtype), out_dtype=torch.float32)
    assert result.dtype == torch.float32 and result.device.type == "openreg"
    assert torch.equal(result.cpu(), expected)
    out = torch.full(expected.shape, float("nan"), device="openreg")
    assert call(*_on("openreg", operands, dtype), out_dtype=torch.float32, out=out) is out
    assert torch.equal(out.cpu(), expected)
    with pytest.raises(NotImplementedError):  # CUDA alone has these kernels
        call(*_on("cpu", operands, dtype), out_dtype=torch.float32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", CALLS)
def test_the_operands_own_dtype_is_the_plain_matmul(name, dtype):
    operands, call, plain = CALLS[name]
    result = call(*_on("openreg", operands, dtype), out_dtype=dtype)
    assert torch.equal(result.cpu(), plain(*_on("cpu", operands, dtype)))


def _h(*shape, dtype=torch.bfloat16):
    return torch.ones(*shape, dtype=dtype, device="openreg")


ERRORS = {
    "mm to float16": (lambda: torch.mm(_h(2, 3, dtype=torch.float32), _h(3, 2, dtype=torch.float32),
                                       out_dtype=torch.float16),
                      "out_dtype must be the same as input dtype or fp32 for fp16/bf16 inputs"),
    "mm of two dtypes": (lambda: torch.mm(_h(2, 3), _h(3, 2, dtype=torch.float16), out_dtype=torch.float32),
                         "input dtypes must be the same"),
    "mm of a vector": (lambda: torch.mm(_h(3), _h(3, 2), out_dtype=torch.float32),
                       "self must be a matrix, got 1-D tensor"),
    # CUDA sizes the result before its checks
    "mm by a vector": (lambda: torch.mm(_h(2, 3), _h(3), out_dtype=torch.float32), "Dimension out of range"),
    "mm shapes": (lambda: torch.mm(_h(2, 3), _h(2, 3), out_dtype=torch.float32),
                  r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 2x3\)"),
    "mm into another dtype": (lambda: torch.mm(_h(2, 3), _h(3, 2), out_dtype=torch.float32, out=_h(2, 2)),
                              "out_dtype must be the same as the dtype of the provided out tensor"),
    "addmm of two dtypes": (lambda: torch.addmm(_h(2, 2, dtype=torch.float32), _h(2, 3), _h(3, 2),
                                                out_dtype=torch.float32),
                            "self and mat2 must have the same dtype, but got Float and BFloat16"),
    "addmm of a batch": (lambda: torch.addmm(_h(2, 2), _h(1, 2, 3), _h(3, 2), out_dtype=torch.float32),
                         "mat1 must be a matrix, got 3-D tensor"),
    "bmm of matrices": (lambda: torch.bmm(_h(2, 3), _h(2, 3, 2), out_dtype=torch.float32),
                        "batch1 must be a 3D tensor"),
    "bmm shapes": (lambda: torch.bmm(_h(2, 2, 3), _h(2, 2, 3), out_dtype=torch.float32),
                   r"Expected size for first two dimensions of batch2 tensor to be: \[2, 3\] but got: \[2, 2\]."),
    "baddbmm of a broadcast self": (lambda: torch.baddbmm(_h(2, 2), _h(2, 2, 3), _h(2, 3, 2),
                                                          out_dtype=torch.float32), "self must be a 3D tensor"),
    "baddbmm of another shape": (lambda: torch.baddbmm(_h(2, 1, 2), _h(2, 2, 3), _h(2, 3, 2),
                                                       out_dtype=torch.float32),
                                 "self must have the same shape as the output"),
}


@pytest.mark.parametrize("case", ERRORS)
def test_what_cuda_refuses_is_refused_at_the_call(case):
    call, message = ERRORS[case]
    with pytest.raises((RuntimeError, IndexError), match=message):
        call()
    torch.openreg.synchronize()  # nothing was left to fail later


def test_int8_matmul_of_shapes_cuda_takes_is_the_cpus():
    g = torch.Generator().manual_seed(1)
    a, b = (torch.randint(-100, 100, shape, generator=g, dtype=torch.int8) for shape in [(17, 24), (24, 16)])
    assert torch.equal(torch._int_mm(a.to("openreg"), b.to("openreg")).cpu(), torch._int_mm(a, b))
    out = torch.empty(17, 16, dtype=torch.int32, device="openreg")
    assert torch._int_mm(a.to("openreg"), b.to("openreg"), out=out) is out
    assert torch.equal(out.cpu(), torch._int_mm(a, b))


# (self's shape, mat2's, CUDA's error, whether the CPU takes the shapes)
INT8_SHAPES = {
    "16 rows": ((16, 8), (8, 8), r"self.size\(0\) needs to be greater than 16, but got 16", True),
    "inner size not a multiple of 8": (
        (32, 12), (12, 8), r"self.size\(1\) needs to be greater than 0 and a multiple of 8, but got 12", True),
    "inner sizes differ": ((32, 16), (8, 8), r"self.size\(1\) needs to match mat2.size\(0\) but got 16 and 8",
                           False),
    "columns not a multiple of 8": (
        (32, 8), (8, 4), r"mat2.size\(1\) needs to be greater than 0 and a multiple of 8, but got 4", True),
    "a vector": ((32,), (32, 8), "Expected self to be of dimension 2 but got 1", False),
}


@pytest.mark.parametrize("case", INT8_SHAPES)
def test_int8_matmul_refuses_the_shapes_cuda_refuses(case):
    # code quantising small batches to int8 fails on CUDA ("needs to be greater than 16"); the CPU takes them
    self_shape, mat2_shape, message, cpu_takes = INT8_SHAPES[case]
    a, b = torch.ones(self_shape, dtype=torch.int8), torch.ones(mat2_shape, dtype=torch.int8)
    if cpu_takes:
        assert torch._int_mm(a, b).shape == (self_shape[0], mat2_shape[1])
    with pytest.raises(RuntimeError, match=message):
        torch._int_mm(a.to("openreg"), b.to("openreg"))
