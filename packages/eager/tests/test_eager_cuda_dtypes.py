"""Dtypes CUDA computes where the CPU has no kernel (csrc/generic/cuda_dtypes.cpp): openreg computes them as CUDA
does, in the wider type (float for float16 and bfloat16, complex64 for complex32) rounded once, and refuses, with
the CPU's error, what CUDA refuses. The reference is OpInfo's own list of CUDA's dtypes (its `dtypesIfCUDA`
against its CPU dtypes), each sample computed by the CPU: in the dtype itself where it can, otherwise in the
wider type, rounded to the op's result dtype."""

from __future__ import annotations

import re
import warnings

import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db

WIDER = {
    torch.complex32: torch.complex64,
    torch.float16: torch.float32,
    torch.bfloat16: torch.float32,
    torch.bool: torch.uint8,
}

# Computed by a kernel of openreg's own, not by widening (test_eager_complex_nansum.py).
OWN_KERNEL = {"nansum", "nanmean"}
# Computed widened, as on CUDA, though the CPU also computes them in the narrow dtype (kernels/normalization.cpp).
WIDENED_BY_OWN_KERNEL = {"nn.functional.batch_norm"}


def _computed(op):
    # Sparse tensors run the CPU's kernel for their layout as it is (README, "Sparse ... tensors").
    return op.name not in OWN_KERNEL and not op.name.startswith("sparse.")


# Samples that draw random numbers: checked against the range their results may take (openreg draws its own).
def _random(op, sample):
    return op.name == "nn.functional.rrelu" and sample.kwargs.get("training", False)


def _assert_rrelu_in_range(got, sample, grad):
    """rrelu in training scales each negative element by a slope drawn from [lower, upper] (its gradient)."""
    x = sample.input.double()
    lower, upper = sample.kwargs.get("lower", 1 / 8), sample.kwargs.get("upper", 1 / 3)
    slopes = (torch.full_like(x, lower), torch.full_like(x, upper))
    bounds = slopes if grad else (x * slopes[1], x * slopes[0])
    low, high = (torch.where(x < 0, b, 1.0 if grad else x) for b in bounds)
    tolerance = 2 * torch.finfo(got[0].dtype).eps * (high.abs() + 1)  # one rounding of the result
    assert ((got[0].double() >= low - tolerance) & (got[0].double() <= high + tolerance)).all(), (sample, got)


# Composites that round between their kernels, as on CUDA, where the reference rounds once: hfft2 and hfftn of
# complex32 (each FFT kernel rounds its result), stft (its windowed frames are in the input's dtype).
ROUNDED_BETWEEN_KERNELS = {"fft.hfft2", "fft.hfftn", "stft"}


def _tolerance(op, dtype, expected):
    """A few roundings in `dtype` of the largest value, where the op rounds between kernels."""
    if op.name not in ROUNDED_BETWEEN_KERNELS:
        return {}
    narrow = torch.float16 if dtype == torch.complex32 else dtype
    return {"rtol": 0, "atol": 4 * torch.finfo(narrow).eps * max(t.abs().max().item() for t in expected)}


def _cuda_only():
    """(op, dtype) for every dtype OpInfo lists for CUDA and not for the CPU, in the dtypes openreg widens."""
    for op in op_db:
        if op.name.startswith("torch.ops.aten._"):  # flash/efficient attention: CUDA's own kernels, no CPU one
            continue
        for dtype in sorted(set(op.dtypesIf.get("cuda", op.dtypes)) - set(op.dtypes), key=str):
            name = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
            if dtype in WIDER and _computed(op):
                yield pytest.param(op, dtype, id=f"{name}-{str(dtype)[6:]}")


def _widen(t, dtype):
    """A complex32 computation also widens the float16 tensors a complex number promotes to it."""
    narrow = (dtype, torch.float16) if dtype == torch.complex32 else (dtype,)
    return t.to(WIDER[t.dtype]) if isinstance(t, torch.Tensor) and t.dtype in narrow else t


def _result_dtypes(op, sample):
    """What the op returns in the narrow dtype, as its meta kernel (shared by every device) says."""
    meta = sample.transform(lambda t: t.to("meta") if isinstance(t, torch.Tensor) else t)
    out = op(meta.input, *meta.args, **meta.kwargs)
    return [t.dtype for t in _tensors(out)]


def _tensors(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _expected(op, sample, dtype, result_dtypes, grad=False):
    """The CPU's results (with `grad`, the input's gradient): in the dtype itself where it computes it and
    openreg does not widen it as CUDA does, otherwise in the wider type, rounded."""
    wide = sample.transform(lambda t: _widen(t, dtype))
    if wide.kwargs.get("dtype") == dtype:
        wide.kwargs["dtype"] = WIDER[dtype]
    for s in (wide,) if op.name in WIDENED_BY_OWN_KERNEL else (sample, wide):
        leaf = s.input.detach().requires_grad_(grad)
        try:
            out = _tensors(op(leaf, *s.args, **s.kwargs))
            if grad:
                out = torch.autograd.grad(out, [leaf], [torch.ones_like(t) for t in out])
        except (NotImplementedError, RuntimeError):
            continue
        return [t.to(d) for t, d in zip(out, result_dtypes, strict=True)]
    raise AssertionError(f"the CPU computes {sample} neither in {dtype} nor in {WIDER[dtype]}")


def _on_openreg(op, sample, grad=False):
    dev = sample.transform(lambda t: t.detach().to("openreg") if isinstance(t, torch.Tensor) else t)
    leaves = [dev.input.requires_grad_()] if grad else []
    out = _tensors(op(dev.input, *dev.args, **dev.kwargs))
    if grad:
        out = torch.autograd.grad(out, leaves, [torch.ones_like(t) for t in out])
    return [t.cpu() for t in out]


@pytest.mark.parametrize(("op", "dtype"), list(_cuda_only()))
def test_a_dtype_cuda_computes_is_computed_in_the_wider_type_and_rounded(op, dtype):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "ComplexHalf support is experimental"
        samples = list(op.sample_inputs("cpu", dtype, requires_grad=False))
        assert samples
        for sample in samples:
            result_dtypes = _result_dtypes(op, sample)
            got = _on_openreg(op, sample)
            assert [t.dtype for t in got] == result_dtypes
            if _random(op, sample):
                _assert_rrelu_in_range(got, sample, grad=False)
                continue
            expected = _expected(op, sample, dtype, result_dtypes)
            torch.testing.assert_close(
                got, expected, equal_nan=True, msg=lambda m, s=sample: f"{s}: {m}", **_tolerance(op, dtype, expected)
            )


@pytest.mark.parametrize(
    ("op", "dtype"),
    [p for p in _cuda_only() if p.values[1] in (torch.float16, torch.bfloat16) and p.values[0].supports_autograd],
)
def test_its_gradients_too(op, dtype):
    samples = [s for s in op.sample_inputs("cpu", dtype, requires_grad=False) if s.input.dtype == dtype]
    assert samples
    for sample in samples:
        got = _on_openreg(op, sample, grad=True)
        if _random(op, sample):
            _assert_rrelu_in_range(got, sample, grad=True)
            continue
        expected = _expected(op, sample, dtype, [dtype], grad=True)
        torch.testing.assert_close(
            got, expected, msg=lambda m, s=sample: f"{s}: {m}", **_tolerance(op, dtype, expected)
        )


@pytest.mark.parametrize("fn", [torch.sigmoid, torch.tanh], ids=["sigmoid", "tanh"])
def test_complex32_gradients_of_ops_whose_backward_reads_their_result(fn):
    """OpInfo's gradient tests cover float16 and bfloat16 only; CUDA's sigmoid_backward and tanh_backward also take
    complex32. The reference: complex64, from the result rounded to complex32 as the backward reads it."""
    x = torch.tensor([0.5 + 0.25j, -1.0 + 2.0j, 0.0 - 0.5j], dtype=torch.complex32)
    grad = torch.tensor([1.0 - 1.0j, 0.5 + 0.0j, 2.0 + 1.0j], dtype=torch.complex32)
    dev = x.to("openreg").requires_grad_()
    (got,) = torch.autograd.grad(fn(dev), dev, grad.to("openreg"))
    result = fn(x.to(torch.complex64)).to(torch.complex32).to(torch.complex64)
    backward = torch.ops.aten.sigmoid_backward if fn is torch.sigmoid else torch.ops.aten.tanh_backward
    want = backward(grad.to(torch.complex64), result).to(torch.complex32)
    assert got.dtype == torch.complex32
    torch.testing.assert_close(got.cpu().to(torch.complex64), want.to(torch.complex64), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize(
    "call",
    [
        lambda x: torch.log1p(x.to(torch.complex32)),  # CUDA lists no complex32 log1p
        lambda x: torch.cumsum(x.to(torch.complex32), 0),
        # Widening bool to uint8 (CUDA's sparse mul, bool abs) must not let an integer result into a bool tensor.
        lambda x: torch.mul(x.real.int(), x.real.int(), out=torch.empty(8, dtype=torch.bool, device=x.device)),
        lambda x: torch.ones(8, dtype=torch.bool, device=x.device).mul_(x.real.int()),
        lambda x: torch.mul(torch.ones(8, dtype=torch.bool, device=x.device), 2, out=torch.empty_like(x, dtype=bool)),
        lambda x: torch.abs(x.real.int(), out=torch.empty(8, dtype=torch.bool, device=x.device)),
        # nor the widened dtype itself mix with the narrow one (PyTorch's test_unary_ufuncs.py found these)
        lambda x: torch.abs(x.real.to(torch.uint8), out=torch.empty(8, dtype=torch.bool, device=x.device)),
        lambda x: torch.abs(x.real > 0, out=torch.empty(8, dtype=torch.uint8, device=x.device)),
    ],
    ids=["log1p-complex32", "cumsum-complex32", "mul-into-bool", "bool-mul_-int", "bool-mul-scalar", "abs-into-bool",
         "abs-uint8-into-bool", "abs-bool-into-uint8"],
)
def test_what_openreg_does_not_compute_raises_the_cpus_error(call):
    x = torch.randn(8, dtype=torch.complex64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises((NotImplementedError, RuntimeError)) as on_cpu:
            call(x)
        with pytest.raises(on_cpu.type, match=f"^{re.escape(str(on_cpu.value))}$"):
            call(x.to("openreg")).cpu()


def _integer_histc_reference(x, bins, low, high):
    """CUDA's integer histc: the range truncated to x's type (read from the values when empty, then widened by
    one each way if still empty), binned as the CPU bins float64 (exactly, for integers this small)."""
    low, high = int(torch.tensor(low).to(x.dtype)), int(torch.tensor(high).to(x.dtype))
    if low == high and x.numel():
        low, high = int(x.min()), int(x.max())
    if low == high:
        low, high = low - 1, high + 1
    return torch.histc(x.double(), bins, low, high).to(x.dtype)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64])
@pytest.mark.parametrize(
    ("bins", "low", "high"),
    [(4, 0, 0), (5, 1.7, 8.9), (3, 2, 5), (7, 0, 100), (1, 0, 10)],
    ids=["range-from-values", "truncated-range", "values-outside", "wide", "one-bin"],
)
def test_integer_histc_bins_as_cuda_does(dtype, bins, low, high):
    x = torch.randint(0, 12, (40,), generator=torch.Generator().manual_seed(bins)).to(dtype)
    expected = _integer_histc_reference(x, bins, low, high)
    assert torch.equal(torch.histc(x.to("openreg"), bins, low, high).cpu(), expected)
    out = torch.empty(0, dtype=dtype, device="openreg")
    torch.histc(x.to("openreg"), bins, low, high, out=out)
    assert torch.equal(out.cpu(), expected)


@pytest.mark.parametrize(
    ("x", "bins", "low", "high", "message"),
    [
        (torch.arange(4), 0, 0, 3, "torch.histc: bins must be > 0, but got 0"),
        (torch.arange(4), 4, 3, 1, "torch.histc: max must be larger than min"),
        (torch.arange(4, dtype=torch.int8), 4, 0, 300, "value cannot be converted to type int8_t without overflow"),
    ],
    ids=["no-bins", "reversed-range", "range-outside-the-type"],
)
def test_integer_histc_refuses_what_cuda_refuses(x, bins, low, high, message):
    with pytest.raises(RuntimeError, match=re.escape(message)):
        torch.histc(x.to("openreg"), bins, low, high)


def test_an_empty_integer_histc_counts_nothing():
    x = torch.empty(0, dtype=torch.int32, device="openreg")
    assert torch.equal(torch.histc(x, 3).cpu(), torch.zeros(3, dtype=torch.int32))
