"""CUDA's add and sub read a CPU scalar (a Python number, a 0-dim CPU tensor) and alpha at the precision they
compute in, float for a float16 or bfloat16 result, and round the result once; the CPU's kernels first round the
scalar and alpha to the result's dtype (kernels/add_sub_scalars.cpp). The reference is that definition computed on
the CPU in float32 (float64 where CUDA's kernel fuses a multiply and an add); every other call is the CPU's,
exactly."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

import openreg_eager  # noqa: F401  (registers the openreg kernels)

# 1.7 rounds to 1.703125 in bfloat16 (1.7001953125 in float16): a rounded scalar cancels these elements exactly.
BOUNDARY = {torch.bfloat16: [-1.703125, 1.703125, 0.5], torch.float16: [-1.7001953125, 1.7001953125, 0.5]}
SCALARS = {
    "float": 1.7,
    "0-dim float64": torch.tensor(1.7, dtype=torch.float64),
    "0-dim float32": torch.tensor(1.7),
}


def _inputs(dtype):
    rest = torch.randn(61, generator=torch.Generator().manual_seed(0)) * 4
    return torch.cat([torch.tensor(BOUNDARY[dtype]), rest]).to(dtype)


def _cuda_add(x, scalar, alpha, scalar_first=False):
    """CUDA's AddFunctor in float32: a + alpha * b, then one rounding to x's dtype."""
    s = torch.as_tensor(scalar, dtype=torch.float32)
    a, b = (s, x.float()) if scalar_first else (x.float(), s)
    return (a + alpha * b).to(x.dtype)


CALLS = {
    "add": (lambda x, s: torch.add(x, s), lambda x, s: _cuda_add(x, s, 1)),
    "add alpha": (lambda x, s: torch.add(x, s, alpha=2), lambda x, s: _cuda_add(x, s, 2)),
    "sub": (lambda x, s: x - s, lambda x, s: _cuda_add(x, s, -1)),
    "rsub": (lambda x, s: s - x if not isinstance(s, torch.Tensor) else torch.sub(s, x),
             lambda x, s: _cuda_add(x, s, -1, scalar_first=True)),
    "add_": (lambda x, s: x.clone().add_(s), lambda x, s: _cuda_add(x, s, 1)),
    "sub_ alpha": (lambda x, s: x.clone().sub_(s, alpha=3), lambda x, s: _cuda_add(x, s, -3)),
    "add out": (lambda x, s: torch.add(x, s, out=torch.empty_like(x)), lambda x, s: _cuda_add(x, s, 1)),
    # CUDA rounds to the result's dtype before it writes an out= of another one
    "sub out float32": (lambda x, s: torch.sub(x, s, out=torch.empty(x.shape, device=x.device)),
                        lambda x, s: _cuda_add(x, s, -1).float()),
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("scalar", SCALARS)
@pytest.mark.parametrize("call", CALLS)
def test_a_cpu_scalar_is_read_in_float_as_cudas_add_and_sub_read_it(call, scalar, dtype):
    fn, cuda = CALLS[call]
    x, s = _inputs(dtype), SCALARS[scalar]
    result = fn(x.to("openreg"), s)
    assert result.device.type == "openreg"
    expected = cuda(x, s)
    assert result.dtype == expected.dtype
    assert torch.equal(result.cpu(), expected)
    assert not torch.equal(fn(x, s), expected)  # the CPU's kernel rounds the scalar: the case differs there


@pytest.mark.parametrize(("dtype", "scalar"), [
    (torch.float32, 1.7), (torch.float64, 1.7), (torch.int32, 3), (torch.int64, torch.tensor(5)),
    (torch.bfloat16, torch.tensor(1.7, dtype=torch.bfloat16)),  # already the tensor's dtype: nothing to round
    (torch.float16, torch.tensor(1.7, dtype=torch.float16)),
], ids=str)
@pytest.mark.parametrize("call", CALLS)
def test_every_other_call_is_the_cpus(call, dtype, scalar):
    fn, _ = CALLS[call]
    x = (torch.randn(64, generator=torch.Generator().manual_seed(1)) * 50).to(dtype)
    assert_close(fn(x.to("openreg"), scalar).cpu(), fn(x, scalar), rtol=0, atol=0)


def test_tensors_on_the_device_are_the_cpus():
    # Only host scalars are read apart; a 0-dim device tensor is an operand like any other.
    x = _inputs(torch.bfloat16)
    s = torch.tensor(1.7, dtype=torch.float64)
    assert_close((x.to("openreg") + s.to("openreg")).cpu(), x + s, rtol=0, atol=0)
    assert_close((x.to("openreg") + x.flip(0).to("openreg")).cpu(), x + x.flip(0), rtol=0, atol=0)


def _cuda_alpha(a, b, alpha):
    """CUDA's AddFunctor for tensors: a + b * alpha, with the operands read as the result's dtype and alpha as
    float32, fused into one multiply-add in float32 (computed here exactly in float64, then rounded), then one
    rounding to the result's dtype."""
    dtype = torch.result_type(a, b)
    exact = a.to(dtype).double() + torch.tensor(alpha, dtype=torch.float32).double() * b.to(dtype).double()
    return exact.float().to(dtype)


ALPHA_CALLS = {
    "add": lambda a, b, alpha: torch.add(a, b, alpha=alpha),
    "sub": lambda a, b, alpha: torch.sub(a, b, alpha=-alpha),
    "add_": lambda a, b, alpha: a.clone().add_(b, alpha=alpha),
    "sub_": lambda a, b, alpha: a.clone().sub_(b, alpha=-alpha),
    "add out": lambda a, b, alpha: torch.add(a, b, alpha=alpha, out=torch.empty_like(a)),
}


@pytest.mark.parametrize("alpha", [0.3, -1.7, 2.5e-3])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("call", ALPHA_CALLS)
def test_alpha_is_read_in_float_as_cudas_add_and_sub_read_it(call, dtype, alpha):
    g = torch.Generator().manual_seed(2)
    a, b = ((torch.randn(4096, generator=g) * 3).to(dtype) for _ in range(2))
    fn = ALPHA_CALLS[call]
    result = fn(a.to("openreg"), b.to("openreg"), alpha)
    expected = _cuda_alpha(a, b, alpha)
    assert result.dtype == expected.dtype
    assert torch.equal(result.cpu(), expected)
    assert not torch.equal(fn(a, b, alpha), expected)  # the CPU's kernel rounds alpha: the case differs there


def test_an_operand_of_another_dtype_is_read_as_the_results_dtype_with_alpha_in_float():
    a = torch.ones(64, dtype=torch.bfloat16)
    ints = torch.arange(64) * 1001  # not all of them are bfloat16 values
    assert torch.equal(torch.add(a.to("openreg"), ints.to("openreg"), alpha=0.3).cpu(), _cuda_alpha(a, ints, 0.3))
    mask = ints % 3 == 0  # a bool operand reads as 0 or 1
    assert torch.equal(torch.add(a.to("openreg"), mask.to("openreg"), alpha=0.3).cpu(), _cuda_alpha(a, mask, 0.3))


def test_alpha_times_a_large_float16_does_not_overflow_before_the_addition_as_on_cuda():
    # PyTorch's test_binary_ufuncs.py::test_addsub_half_tensor, which expects CUDA's finite results.
    x = torch.tensor([60000.0], dtype=torch.half, device="openreg")
    for op, y, alpha, expected in [(torch.add, torch.tensor([-60000.0], dtype=torch.half), 2, -60000.0),
                                   (torch.sub, torch.tensor([60000.0], dtype=torch.half), 2, -60000.0),
                                   (torch.add, -70000.0, 1, -10000.0), (torch.sub, 70000.0, 1, -10000.0)]:
        device_y = y.to("openreg") if isinstance(y, torch.Tensor) else y
        assert op(x, device_y, alpha=alpha).item() == expected
        assert op(x.cpu(), y, alpha=alpha).isinf().all()  # the CPU's kernel overflows


def _lists(dtype):
    g = torch.Generator().manual_seed(3)
    return [[(torch.randn(n, generator=g) * 3).to(dtype) for n in (300, 77)] for _ in range(2)]


def _in_place(foreach):
    def call(a, *args, **kwargs):
        a = [t.clone() for t in a]
        foreach(a, *args, **kwargs)
        return a

    return call


FOREACH_CALLS = {
    "_foreach_add, alpha": (lambda a, b: torch._foreach_add(a, b, alpha=0.3),
                            lambda a, b: [_cuda_alpha(x, y, 0.3) for x, y in zip(a, b, strict=True)]),
    "_foreach_sub_, alpha": (lambda a, b: _in_place(torch._foreach_sub_)(a, b, alpha=1.7),
                             lambda a, b: [_cuda_alpha(x, y, -1.7) for x, y in zip(a, b, strict=True)]),
    "_foreach_add_, scalar": (lambda a, b: _in_place(torch._foreach_add_)(a, 1.7),
                              lambda a, b: [_cuda_add(x, 1.7, 1) for x in a]),
    "_foreach_sub, scalar": (lambda a, b: torch._foreach_sub(a, 1.7), lambda a, b: [_cuda_add(x, 1.7, -1) for x in a]),
    "_foreach_add, scalar list": (lambda a, b: torch._foreach_add(a, [1.7, -0.3]),
                                  lambda a, b: [_cuda_add(x, s, 1) for x, s in zip(a, [1.7, -0.3], strict=True)]),
    "_foreach_sub_, scalar list": (lambda a, b: _in_place(torch._foreach_sub_)(a, [1.7, -0.3]),
                                   lambda a, b: [_cuda_add(x, s, -1) for x, s in zip(a, [1.7, -0.3], strict=True)]),
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("call", FOREACH_CALLS)
def test_foreach_add_and_sub_read_alpha_and_scalars_in_float_as_cudas(call, dtype):
    fn, cuda = FOREACH_CALLS[call]
    a, b = _lists(dtype)
    result = fn([t.to("openreg") for t in a], [t.to("openreg") for t in b])
    expected = cuda(a, b)
    assert [t.device.type for t in result] == ["openreg"] * 2
    assert all(torch.equal(r.cpu(), e) for r, e in zip(result, expected, strict=True))
    assert not all(torch.equal(r, e) for r, e in zip(fn(a, b), expected, strict=True))  # the CPU rounds them


@pytest.mark.parametrize("call", FOREACH_CALLS)
def test_foreach_add_and_sub_of_other_dtypes_are_the_cpus(call):
    fn, _ = FOREACH_CALLS[call]
    a, b = _lists(torch.float32)
    for r, e in zip(fn([t.to("openreg") for t in a], [t.to("openreg") for t in b]), fn(a, b), strict=True):
        assert_close(r.cpu(), e, rtol=0, atol=0)


def test_foreach_add_in_place_of_unlike_lists_reads_alpha_in_float_too():
    # Not one kernel's work (openreg runs an optimizer's lists as one): other broadcast, dtypes mixed.
    g = torch.Generator().manual_seed(5)
    a = [(torch.randn(3, 40, generator=g) * 3).to(dt) for dt in (torch.bfloat16, torch.float16)]
    b = [(torch.randn(40, generator=g) * 3).to(torch.bfloat16) for _ in range(2)]
    result = _in_place(torch._foreach_add_)([t.to("openreg") for t in a], [t.to("openreg") for t in b], alpha=0.3)
    for r, x, y in zip(result, a, b, strict=True):
        assert torch.equal(r.cpu(), _cuda_alpha(x, y.to(x.dtype).expand_as(x), 0.3).to(x.dtype))


def test_a_foreach_sgd_step_on_bfloat16_parameters_moves_them_by_lr_read_in_float():
    g = torch.Generator().manual_seed(4)
    param, grad = (torch.randn(512, generator=g).to(torch.bfloat16) for _ in range(2))
    stepped = {}
    for device in ("cpu", "openreg"):
        p = torch.nn.Parameter(param.to(device))
        p.grad = grad.to(device)
        torch.optim.SGD([p], lr=0.01, foreach=True).step()
        stepped[device] = p.detach().cpu()
    assert torch.equal(stepped["openreg"], _cuda_alpha(param, grad, -0.01))
    assert not torch.equal(stepped["cpu"], stepped["openreg"])  # the CPU steps by lr rounded to bfloat16


ERRORS = {
    "out of an integer dtype": lambda x: torch.add(x, 1.7, out=torch.empty(x.shape, dtype=torch.int32,
                                                                           device=x.device)),
    "written elements overlap": lambda x: x.expand(2, *x.shape).add_(1.7),
    "complex alpha": lambda x: torch.sub(x, 1.7, alpha=1j),
    "in place into an integer tensor": lambda x: torch.zeros(x.shape, dtype=torch.int64, device=x.device).add_(
        x, alpha=0.5),
    "foreach lists of two lengths": lambda x: torch._foreach_add([x, x], [x], alpha=0.5),
    "foreach scalars of another length": lambda x: torch._foreach_sub_([x], [1.7, 2.0]),
    # found by PyTorch's test_foreach.py on openreg: the wide paths' own checks raised later, or others
    "sub of a bool tensor, alpha": lambda x: torch.sub(x, x > 0, alpha=2),
    "foreach sub of a bool scalar": lambda x: torch._foreach_sub([x], True),
    "foreach sub_ of bool scalars": lambda x: torch._foreach_sub_([x, x.clone()], [True, 1]),
    "foreach sub_ of bool tensors, alpha": lambda x: torch._foreach_sub_([x], [x > 0], alpha=2),
    "foreach add_ of a complex scalar": lambda x: torch._foreach_add_([x, x.clone()], 1j),
    "foreach add_ of complex scalars": lambda x: torch._foreach_add_([x, x.clone()], [2, 1j]),
    "foreach add_ into elements written twice": lambda x: torch._foreach_add_(
        [x.expand(2, *x.shape)], [torch.ones(2, *x.shape, dtype=x.dtype, device=x.device)], alpha=0.5),
    "foreach add_ of a scalar into elements written twice": lambda x: torch._foreach_add_([x.expand(2, *x.shape)],
                                                                                         0.5),
    "foreach add_ reading what it writes, shifted": lambda x: torch._foreach_add_([x[1:]], [x[:-1]], alpha=0.5),
    "sub_ reading what it writes, shifted": lambda x: x[1:].sub_(x[:-1], alpha=0.3),
    "out= partly overlapping the input": lambda x: torch.add(x[:-1], 1.7, out=x[1:]),
}


@pytest.mark.parametrize("case", ERRORS)
def test_what_the_cpu_refuses_is_refused_with_its_error(case):
    x = _inputs(torch.bfloat16)
    with pytest.raises(Exception) as on_cpu:
        ERRORS[case](x)
    with pytest.raises(type(on_cpu.value)) as on_openreg:
        ERRORS[case](x.to("openreg"))
    assert str(on_openreg.value) == str(on_cpu.value)
    torch.openreg.synchronize()  # nothing was left to fail later


def test_an_out_of_another_shape_is_resized_with_the_cpus_warning():
    x = _inputs(torch.bfloat16)
    with pytest.warns(UserWarning, match="An output with one or more elements was resized"):
        expected = torch.add(x, 1.7, out=torch.empty(5))
    with pytest.warns(UserWarning, match="An output with one or more elements was resized"):
        result = torch.add(x.to("openreg"), 1.7, out=torch.empty(5, device="openreg"))
    assert result.shape == expected.shape
    assert torch.equal(result.cpu(), _cuda_add(x, 1.7, 1).float())
