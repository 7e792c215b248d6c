"""Half-precision FFTs behave as on CUDA (csrc/kernels/fft.cpp): torch.fft's front ends take float16 signals on
openreg, cuFFT's rule that every transformed size of a float16 or complex32 signal be a power of two is kept, and
bfloat16 follows the torch release (refused by torch 2.13's front end, computed as float32 from 2.14). Values and
gradients against the CPU in float32 rounded are in test_eager_cuda_dtypes.py, for every OpInfo sample."""

from __future__ import annotations

import re
import warnings

import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db

POWER_OF_TWO = "cuFFT only supports dimensions whose sizes are powers of two when computing in half precision"


def _signal(*shape, dtype=torch.float16):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(len(shape))).to(dtype).to("openreg")


@pytest.mark.parametrize(
    ("call", "signal"),
    [
        (lambda: torch.fft.fft(_signal(4, 6)), [6]),
        (lambda: torch.fft.rfft2(_signal(4, 6)), [4, 6]),
        (lambda: torch.fft.irfft(_signal(4, 4), n=6), [6]),
        (lambda: torch.fft.hfft(_signal(5)), [8]),  # a 5-long half spectrum is an 8-long signal: allowed
        (lambda: torch.fft.irfft(_signal(8)), [14]),
        (lambda: torch.fft.fft(_signal(6, dtype=torch.complex32)), [6]),
        (lambda: torch.stft(_signal(64), 6, return_complex=True), [6]),
        (lambda: torch.fft.fftn(_signal(2, 3, 4)), [2, 3, 4]),
        (lambda: torch.fft.fftn(_signal(2, 3, 4), s=(2, 4, 4)), [2, 4, 4]),
        (lambda: torch.fft.fft2(_signal(3, 4, 8)), [4, 8]),  # the last two dims by default: allowed
        (lambda: torch.fft.ifftn(_signal(3, 4, 8), dim=(0, 2)), [3, 8]),
        # hfftn transforms the leading dims first, then the last; ihfftn the last first
        (lambda: torch.fft.hfft2(_signal(6, 5)), [6]),
        (lambda: torch.fft.hfft2(_signal(4, 4)), [6]),
        (lambda: torch.fft.ihfft2(_signal(6, 8)), [6]),
        (lambda: torch.fft.ihfft2(_signal(8, 6)), [6]),
    ],
    ids=[
        *("fft", "rfft2", "irfft-n", "hfft-power-of-two", "irfft", "fft-complex32", "stft", "fftn", "fftn-s"),
        *("fft2-default-dims", "ifftn-dim", "hfft2-leading", "hfft2-last", "ihfft2-leading", "ihfft2-last"),
    ],
)
def test_a_half_precision_signal_needs_power_of_two_sizes(call, signal):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "ComplexHalf support is experimental"
        if all(n & (n - 1) == 0 for n in signal):
            assert call().cpu().isfinite().all()
            return
        with pytest.raises(RuntimeError, match=re.escape(f"{POWER_OF_TWO}, but got a signal size of{signal}")):
            call()


@pytest.mark.parametrize(
    "call",
    [
        lambda d: torch.fft.ihfft2(torch.zeros(3, 5, dtype=torch.complex32, device=d)),
        lambda d: torch.fft.ihfftn(torch.zeros(3, 5, dtype=torch.complex32, device=d)),
        lambda d: torch.ops.aten._fft_r2c(torch.zeros(5, dtype=torch.complex32, device=d), [0], 0, True),
        lambda d: torch.ops.aten._fft_c2c(torch.zeros(5, dtype=torch.float16, device=d), [0], 0, True),
        lambda d: torch.ops.aten._fft_c2r(torch.zeros(5, dtype=torch.float16, device=d), [0], 0, 7),
    ],
    ids=["ihfft2-complex32", "ihfftn-complex32", "r2c-complex32", "c2c-float16", "c2r-float16"],
)
def test_a_signal_of_the_wrong_kind_gets_the_dtype_error_before_the_size_rule(call):
    """cuFFT's kernels check the input's kind first, as the CPU's do: not the power-of-two rule of their size."""
    with pytest.raises(Exception) as want:  # noqa: PT011 - the CPU's error is the one compared
        call("cpu")
    with pytest.raises(type(want.value), match=re.escape(str(want.value))):
        call("openreg")


def test_padding_to_a_power_of_two_computes_it():
    x = _signal(4, 6)
    expected = torch.fft.fft(x.cpu().float(), n=8).to(torch.complex32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.testing.assert_close(torch.fft.fft(x, n=8).cpu(), expected)


def test_a_float16_fft_in_inference_mode():
    x = _signal(4, 8)
    with torch.inference_mode(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.testing.assert_close(torch.fft.rfft(x).cpu(), torch.fft.rfft(x.cpu().float()).to(torch.complex32))


@pytest.mark.parametrize("out_dtype", [torch.complex32, torch.complex64, torch.complex128])
def test_out_gets_cudas_float16_result_in_its_own_dtype(out_dtype):
    x = _signal(4, 8)
    out = torch.empty(0, dtype=out_dtype, device="openreg")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert torch.fft.fft(x, out=out) is out
    expected = torch.fft.fft(x.cpu().float()).to(torch.complex32).to(out_dtype)  # CUDA's result is complex32
    torch.testing.assert_close(out.cpu(), expected)


def test_out_is_checked_and_warned_about_as_on_the_cpu():
    """The same errors and warnings as a float32 FFT on the CPU gives, where CUDA's front end and the CPU's agree."""

    def calls(device, dtype):
        x = torch.randn(4, 8).to(dtype).to(device)
        complex_dtype = torch.complex32 if dtype == torch.float16 else torch.complex64
        yield lambda: torch.fft.fft(x, out=torch.empty(0, device=device, dtype=dtype))
        yield lambda: torch.fft.fft(x.requires_grad_(), out=torch.empty(0, device=device, dtype=complex_dtype))

    for on_cpu, on_openreg in zip(calls("cpu", torch.float32), calls("openreg", torch.float16), strict=True):
        with pytest.raises(RuntimeError) as expected:
            on_cpu()
        message = str(expected.value).replace("Float", "Half")
        with pytest.raises(RuntimeError, match=f"^{re.escape(message)}$"):
            on_openreg()
    for device, dtype in (("cpu", torch.float32), ("openreg", torch.float16)):
        out = torch.empty(3, device=device, dtype=torch.complex32 if dtype == torch.float16 else torch.complex64)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.fft.fft(torch.randn(4, 8).to(dtype).to(device), out=out)
        assert [str(w.message).split(".")[0] for w in caught if "resized" in str(w.message)] == [
            "An output with one or more elements was resized since it had shape [3], which does not match the "
            "required output shape [4, 8]"
        ], device


def _cuda_takes_bfloat16(name):
    return torch.bfloat16 in next(op for op in op_db if op.name == name).dtypesIfCUDA


@pytest.mark.parametrize("name", ["fft.fft", "fft.rfft", "fft.irfft", "fft.hfftn", "fft.ihfft2"])
def test_bfloat16_is_computed_where_the_torch_release_computes_it_on_cuda(name):
    fn = getattr(torch.fft, name.split(".")[1])
    x = torch.randn(4, 8).bfloat16()
    if _cuda_takes_bfloat16(name):  # from torch 2.14: promoted to float32, as CUDA's front end does
        got = fn(x.to("openreg"))
        expected = fn(x.float())
        assert got.dtype == expected.dtype
        torch.testing.assert_close(got.cpu(), expected)
        return
    with pytest.raises(RuntimeError) as on_cpu:
        fn(x)
    with pytest.raises(on_cpu.type, match=f"^{re.escape(str(on_cpu.value))}$"):
        fn(x.to("openreg"))


def test_float32_ffts_keep_torchs_own_front_end():
    x = torch.randn(3, 8, 4, dtype=torch.float64)
    for name in ("fftn", "rfftn", "ihfftn", "irfftn", "hfft", "ifft2"):
        fn = getattr(torch.fft, name)
        torch.testing.assert_close(fn(x.to("openreg")).cpu(), fn(x), msg=name)
