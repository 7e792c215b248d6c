"""Complex nansum and nanmean (csrc/kernels/nansum.cpp): CUDA computes them, leaving out every element with a NaN
real or imaginary part; the CPU refuses them. The reference is OpInfo's own (numpy's nansum and nanmean) over
OpInfo's samples, with NaNs put in both parts; complex32, which numpy lacks, is compared in complex64 and rounded."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db

OPS = [op for op in op_db if op.name in ("nansum", "nanmean")]
DTYPES = [torch.complex32, torch.complex64, torch.complex128]


def _with_nans(t):
    """Every third element gets a NaN real part, every fifth a NaN imaginary part: both count as NaN."""
    wide = t.to(torch.complex128).clone().flatten()
    wide[::3] = torch.complex(torch.tensor(float("nan"), dtype=torch.float64), wide[::3].imag)
    wide[1::5] = torch.complex(wide[1::5].real, torch.tensor(float("nan"), dtype=torch.float64))
    return wide.reshape(t.shape).to(t.dtype)


def _samples(op, dtype):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "ComplexHalf support is experimental"
        for sample in op.sample_inputs("cpu", dtype):
            yield _with_nans(sample.input), sample.kwargs


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_values_are_numpys(op, dtype):
    for x, kwargs in _samples(op, dtype):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = op(x.to("openreg"), **kwargs).cpu()
            ref = op.ref(x.to(torch.complex64 if dtype == torch.complex32 else dtype).numpy(), **kwargs)
            expected = torch.from_numpy(np.asarray(ref)).to(dtype)
        assert got.dtype == dtype
        torch.testing.assert_close(got, expected, equal_nan=True, msg=lambda m, x=x, k=kwargs: f"{x} {k}: {m}")


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_out_is_written(op):
    x = _with_nans(torch.randn(4, 6, dtype=torch.complex64))
    out = torch.full((6,), 7 + 7j, device="openreg")
    assert op(x.to("openreg"), 0, out=out) is out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy's "Mean of empty slice": a column of NaNs only
        expected = torch.from_numpy(op.ref(x.numpy(), dim=0))
    torch.testing.assert_close(out.cpu(), expected, equal_nan=True)


def test_the_gradient_is_one_where_no_part_is_nan():
    x = _with_nans(torch.randn(5, 3, dtype=torch.complex128)).to("openreg").requires_grad_()
    torch.nansum(x).real.backward()
    expected = (~x.detach().isnan()).to(torch.complex128)
    torch.testing.assert_close(x.grad.cpu(), expected.cpu())


@pytest.mark.parametrize(
    "x", [torch.tensor([[1.0, float("nan"), 2.5], [4.0, -1.0, float("nan")]]), torch.tensor([[1, 2, 3], [4, -1, 0]])]
)
def test_other_dtypes_take_the_cpus_kernel(x):
    torch.testing.assert_close(torch.nansum(x.to("openreg"), 1).cpu(), torch.nansum(x, 1), equal_nan=True)
