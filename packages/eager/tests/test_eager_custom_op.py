"""The example custom op openreg::scaled_silu: device kernel, fake kernel and
autograd formula, in eager mode, under FakeTensorMode and torch.compile."""

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.testing import assert_close

import openreg_eager

D = torch.device("openreg:0")


def reference(x, scale):
    return scale * x * torch.sigmoid(x)


def test_eager_matches_reference_and_cpu_kernel():
    x = torch.randn(5, 7)
    got = openreg_eager.scaled_silu(x.to(D), 1.5)
    assert got.device == D
    assert_close(got.cpu(), reference(x, 1.5))
    assert_close(openreg_eager.scaled_silu(x, 1.5), reference(x, 1.5))


def test_runs_on_a_non_contiguous_input_on_device_1():
    x = torch.randn(6, 4)
    got = openreg_eager.scaled_silu(x.to("openreg:1").t(), 2.0)
    assert got.device == torch.device("openreg:1")
    assert_close(got.cpu(), reference(x.t(), 2.0))


def test_autograd_formula_matches_autograd_of_the_reference():
    x = torch.randn(3, 4, dtype=torch.float64)
    xd = x.to(D).requires_grad_()
    xr = x.clone().requires_grad_()
    openreg_eager.scaled_silu(xd, 0.7).pow(2).sum().backward()
    reference(xr, 0.7).pow(2).sum().backward()
    assert_close(xd.grad.cpu(), xr.grad)


def test_gradcheck_on_cpu_kernel():
    x = torch.randn(3, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: openreg_eager.scaled_silu(t, 1.3), (x,))


def test_fake_tensor_mode_gives_metadata_without_running():
    mode = FakeTensorMode()
    fake = mode.from_tensor(torch.empty(2, 3, device=D))
    with mode:
        out = torch.ops.openreg.scaled_silu(fake, 1.0)
    assert out.shape == (2, 3) and out.device == D and out.dtype == torch.float32


def test_torch_compile_aot_eager():
    x = torch.randn(8, 3)
    fn = torch.compile(lambda t: openreg_eager.scaled_silu(t, 3.0) + 1, backend="aot_eager", fullgraph=True)
    assert_close(fn(x.to(D)).cpu(), reference(x, 3.0) + 1)
    xd = x.to(D).requires_grad_()
    fn(xd).sum().backward()
    xr = x.clone().requires_grad_()
    (reference(xr, 3.0) + 1).sum().backward()
    assert_close(xd.grad.cpu(), xr.grad)


def test_integer_input_is_a_clear_error():
    try:
        openreg_eager.scaled_silu(torch.ones(3, dtype=torch.int64, device=D))
    except RuntimeError as e:
        assert "floating-point" in str(e)
    else:
        raise AssertionError("an integer input should be rejected")
