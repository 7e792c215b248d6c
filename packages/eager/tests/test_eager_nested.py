"""Nested tensors (torch.strided and torch.jagged layouts) on openreg behave as on the CPU: each case runs the same
call on both devices and compares the result (device, nested sizes and padded values), or the exception's type and
message. Strided nested tensors run the CPU's NestedTensorCPU kernels over device memory (and ATen's nested
kernels that CUDA runs too); jagged ones are dense tensors underneath."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F

DEV = "openreg"

# torch notes once that the strided nested API is a prototype.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def nested(d, requires_grad=False, layout=torch.strided):
    g = torch.Generator().manual_seed(0)
    parts = [torch.randn(3, 4, generator=g), torch.randn(2, 4, generator=g)]
    return torch.nested.nested_tensor([p.to(d) for p in parts], requires_grad=requires_grad, layout=layout)


def weight(d, *shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(1)).to(d)


def grad_of(fn, d):
    x = nested(d, requires_grad=True)
    fn(x).to_padded_tensor(0).pow(2).sum().backward()
    return x.grad


def encoder(d):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(4, 2, 8, batch_first=True, dropout=0.0)
    return torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=True).eval().to(d)


def values_grad(d):
    """The gradient of .values() makes a nested view of the gradient with the CPU tensors of sizes and strides."""
    a, b = torch.ones(1, 2, 4, device=d, requires_grad=True), torch.ones(2, 2, 4, device=d, requires_grad=True)
    (torch.nested.as_nested_tensor([a, b]).values() * torch.arange(24.0, device=d)).sum().backward()
    return torch.cat([a.grad.flatten(), b.grad.flatten()])


MASK = [[False, False, False], [False, False, True]]

CASES = {
    "add": lambda d: nested(d) + nested(d),
    "mul_scalar": lambda d: nested(d) * 2,
    "add_": lambda d: nested(d).add_(1),
    "copy_": lambda d: nested(d).copy_(nested("cpu").to(d) * 3),
    "softmax": lambda d: nested(d).softmax(-1),
    "relu": lambda d: F.relu(nested(d)),
    "gelu": lambda d: F.gelu(nested(d)),
    "transpose": lambda d: nested(d).transpose(1, 2).contiguous(),
    "bmm": lambda d: torch.bmm(nested(d), nested(d).transpose(1, 2)),
    "matmul": lambda d: torch.matmul(nested(d), nested(d).transpose(1, 2)),
    "linear": lambda d: F.linear(nested(d), weight(d, 3, 4), weight(d, 3)),
    "layer_norm": lambda d: F.layer_norm(nested(d), (4,), weight(d, 4), weight(d, 4)),
    "reshape": lambda d: nested(d).reshape(2, -1, 2, 2),
    "view": lambda d: nested(d).view(2, -1, 2, 2),
    "clone": lambda d: nested(d).clone(),
    "unbind": lambda d: torch.cat([t.flatten() for t in nested(d).unbind()]),
    "select": lambda d: nested(d)[1],
    "chunk": lambda d: nested(d).chunk(2, -1)[1].contiguous(),
    "from_cpu": lambda d: nested("cpu").to(d),
    "view_from_buffer_copy": lambda d: torch._nested_view_from_buffer_copy(
        torch.arange(20.0, device=d), *map(torch.tensor, ([[2, 5], [2, 5]], [[5, 1], [5, 1]], [0, 10]))
    ),
    "from_padded": lambda d: torch._nested_from_padded(
        torch.arange(24.0).reshape(2, 3, 4).to(d), torch.tensor([[3, 4], [2, 4]])
    ),
    "from_mask": lambda d: torch._nested_tensor_from_mask(
        torch.arange(24.0).reshape(2, 3, 4).to(d), torch.tensor([[1, 1, 1], [1, 1, 0]], dtype=torch.bool, device=d)
    ),
    "grad_padded": lambda d: grad_of(lambda x: x, d),
    "grad_softmax_linear": lambda d: grad_of(lambda x: F.linear(x, weight(d, 3, 4)).softmax(-1), d),
    "grad_values": values_grad,
    "encoder": lambda d: torch.no_grad()(lambda: encoder(d)(nested(d)))(),
    # The fast path turns the padded batch into a nested one and back.
    "encoder_padding_mask": lambda d: torch.no_grad()(
        lambda: encoder(d)(weight(d, 2, 3, 4), src_key_padding_mask=torch.tensor(MASK, device=d))
    )(),
    "jagged": lambda d: (nested(d, layout=torch.jagged) * 3).sin(),
    "jagged_sdpa": lambda d: F.scaled_dot_product_attention(
        *[nested(d, layout=torch.jagged).unflatten(-1, (2, 2)).transpose(1, 2)] * 3
    ).transpose(1, 2),
    # Errors the CPU's kernels raise, raised the same on openreg.
    "matmul_dense": lambda d: torch.matmul(nested(d), weight(d, 4, 5)),
    "eq_nested": lambda d: nested(d) == nested(d),
    "padded_of_noncontiguous": lambda d: nested(d).chunk(2, -1)[1].to_padded_tensor(0),
}


def run(fn, d):
    try:
        out = fn(d)
    except Exception as e:  # noqa: BLE001 - the exception is the result compared
        return e
    if out.is_nested:
        assert out.device.type == d
        return out._nested_tensor_size() if out.layout == torch.strided else None, out.to_padded_tensor(0).cpu()
    assert out.device.type == d
    return out.cpu()


@pytest.mark.parametrize("case", CASES)
def test_same_as_cpu(case):
    want, got = run(CASES[case], "cpu"), run(CASES[case], DEV)
    if isinstance(want, Exception):
        assert type(got) is type(want)
        assert str(got).splitlines()[0] == str(want).splitlines()[0]
    else:
        assert not isinstance(got, Exception), got
        torch.testing.assert_close(got, want)


def test_views_share_device_memory():
    x = nested(DEV)
    first = x.unbind()[0]
    x.mul_(0)
    assert first.device.type == DEV
    assert torch.equal(first.cpu(), torch.zeros(3, 4))


@pytest.mark.parametrize("view", ["transpose", "view", "unbind"])
def test_views_made_in_inference_mode(view):
    """A view of a normal tensor made under inference_mode is a normal tensor, as on the CPU."""
    make = {
        "transpose": lambda x: x.transpose(1, 2),
        "view": lambda x: x.view(2, -1, 2, 2),
        "unbind": lambda x: x.unbind()[0],
    }[view]
    results = {}
    for d in ("cpu", DEV):
        x = nested(d)
        with torch.inference_mode():
            v = make(x)
        results[d] = (v.is_inference(), v._is_view())
    assert results[DEV] == results["cpu"]


# Calls that name the CPU make CPU tensors, as CUDA's nested kernels do.
TO_THE_CPU = {
    "to": lambda x: x.to("cpu"),
    "cpu": lambda x: x.cpu(),
    "to_float64": lambda x: x.to("cpu", torch.float64),
    "to_like": lambda x: x.to(nested("cpu")),
    "zeros_like": lambda x: torch.zeros_like(x, device="cpu"),
}


@pytest.mark.parametrize("call", TO_THE_CPU)
def test_a_call_naming_the_cpu_makes_a_cpu_tensor(call):
    want, got = TO_THE_CPU[call](nested("cpu")), TO_THE_CPU[call](nested(DEV))
    assert got.device == want.device == torch.device("cpu")
    assert torch.equal(got._nested_tensor_size(), want._nested_tensor_size())
    torch.testing.assert_close(got.to_padded_tensor(0), want.to_padded_tensor(0))


@pytest.mark.parametrize("non_blocking", [False, True])
@pytest.mark.parametrize(("src", "dst"), [("cpu", DEV), (DEV, "cpu")])
def test_copy_between_the_cpu_and_openreg(src, dst, non_blocking):
    target = torch.nested.nested_tensor([torch.zeros(3, 4), torch.zeros(2, 4)], device=dst)
    target.copy_(nested(src), non_blocking=non_blocking)
    torch.openreg.synchronize()
    assert target.device.type == dst
    torch.testing.assert_close(target.to_padded_tensor(0).cpu(), nested("cpu").to_padded_tensor(0))


@pytest.mark.parametrize(("src", "dst"), [("openreg:1", "openreg:0"), ("openreg:0", "openreg:1")])
def test_copy_between_devices_reads_the_source_after_its_queued_work(src, dst):
    """The copy runs at the call, as every op of these layouts: after the work still queued on either device."""
    if torch.openreg.device_count() < 2:
        pytest.skip("needs two openreg devices")
    buf = torch.arange(18, dtype=torch.float32, device=src)
    source = torch._nested_view_from_buffer(
        buf, torch.tensor([[3, 4], [2, 3]]), torch.tensor([[4, 1], [3, 1]]), torch.tensor([0, 12])
    )
    target = torch.nested.nested_tensor([torch.zeros(3, 4), torch.zeros(2, 3)], device=dst)
    buf.mul_(2)  # the signature runs once at the call, then is queued
    with torch.openreg.device(torch.device(src).index):
        torch.openreg._sleep(200_000_000)  # a busy source stream: the next write is still queued at the copy
        buf.mul_(2)
    target.copy_(source)
    want = torch.arange(18, dtype=torch.float32) * 4
    torch.testing.assert_close(torch.cat([t.flatten() for t in target.to("cpu").unbind()]), want)


RANDOM = {
    "normal_": lambda x: x.normal_(),
    "randn_like": torch.randn_like,
    "dropout": lambda x: F.dropout(x, 0.5, training=True),
}


@pytest.mark.parametrize("op", RANDOM)
def test_random_ops_draw_from_openregs_generator(op):
    """As CUDA's draw from CUDA's: the same openreg seed gives the same numbers whatever the CPU's, which is left
    untouched."""
    draws = []
    for cpu_seed in (1, 2):
        torch.manual_seed(cpu_seed)
        torch.openreg.manual_seed(7)
        x = nested(DEV)
        cpu_state = torch.get_rng_state()
        draws.append(RANDOM[op](x).to_padded_tensor(0).cpu())
        assert torch.equal(torch.get_rng_state(), cpu_state)
    assert torch.equal(draws[0], draws[1])
    torch.openreg.manual_seed(8)
    assert not torch.equal(RANDOM[op](nested(DEV)).to_padded_tensor(0).cpu(), draws[0])


def _vectors(d):
    g = torch.Generator().manual_seed(3)
    return torch.nested.nested_tensor([torch.randn(3, generator=g).to(d), torch.randn(2, generator=g).to(d)])


def _rows(d, *shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(2)).to(d)


# CUDA's branch for a nested [B, *, D] or [B, *] and a dense [B, 1, D] or [B, 1]: the CPU refuses the pair.
ROW_OPS = {
    "add 3-d": (lambda d: nested(d) + _rows(d, 2, 1, 4), lambda a, b: a + b, (2, 1, 4)),
    "mul 3-d": (lambda d: nested(d) * _rows(d, 2, 1, 4), lambda a, b: a * b, (2, 1, 4)),
    "add 3-d, alpha": (lambda d: torch.add(nested(d), _rows(d, 2, 1, 4), alpha=3), lambda a, b: a + 3 * b, (2, 1, 4)),
    "add 2-d": (lambda d: _vectors(d) + _rows(d, 2, 1), lambda a, b: a + b, (2, 1)),
    "mul 2-d": (lambda d: _vectors(d) * _rows(d, 2, 1), lambda a, b: a * b, (2, 1)),
}


@pytest.mark.parametrize("case", ROW_OPS)
def test_a_dense_row_per_component_is_computed_as_on_cuda(case):
    call, per_component, shape = ROW_OPS[case]
    with pytest.raises(RuntimeError, match="Expected both self and other to be nested"):
        call("cpu")
    got = call(DEV)
    assert got.is_nested and got.device.type == DEV
    components = (nested if len(shape) == 3 else _vectors)("cpu").unbind()
    rows = _rows("cpu", *shape)
    for g, c, r in zip(got.unbind(), components, rows, strict=True):
        torch.testing.assert_close(g.cpu(), per_component(c, r))


@pytest.mark.parametrize(
    "call",
    [
        lambda d: nested(d) - _rows(d, 2, 1, 4),
        lambda d: nested(d) + _rows(d, 2, 1, 3),
        lambda d: nested(d) + _rows(d, 4),
    ],
    ids=["sub", "other width", "1-d other"],
)
def test_other_dense_operands_are_refused_as_on_the_cpu(call):
    with pytest.raises(RuntimeError) as want:
        call("cpu")
    with pytest.raises(RuntimeError, match=re.escape(str(want.value).splitlines()[0])):
        call(DEV)
