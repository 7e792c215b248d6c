"""scaled_dot_product_attention on openreg runs openreg's fused kernel (SDPBackend.OVERRIDEABLE).

Every check of values runs the same call on CPU tensors and on copies of them on openreg and compares the
outputs and the gradients of every floating input, and also asserts which backend openreg took (the aten ops
it ran), so that a check cannot pass by running the math backend instead.
"""

from __future__ import annotations

import re
import time
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._python_dispatch import TorchDispatchMode

import openreg_eager  # noqa: F401  (registers the openreg kernels)

DEVICE = torch.device("openreg:0")
FUSED = "aten._scaled_dot_product_fused_attention_overrideable.default"
FUSED_BACKWARD = "aten._scaled_dot_product_fused_attention_overrideable_backward.default"
LOW = [torch.bfloat16, torch.float16]


class OpLog(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def _randn(*shape, seed, dtype=torch.float32):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _tol(dtype):
    # float32 and float64: assert_close's defaults. Lower precision: both devices accumulate in float32 and round once;
    # the CPU's own flash and math backends differ by up to two units in the last place on these inputs.
    if dtype not in LOW:
        return {}
    eps = torch.finfo(dtype).eps
    return dict(atol=2 * eps, rtol=2 * eps)


def _sdpa(device, q, k, v, mask=None, grad_seed=100, **kwargs):
    """F.scaled_dot_product_attention on `device` copies; returns the output, the gradients of the floating
    inputs (the mask too when it is floating) for a fixed random output gradient, and the aten ops run."""
    ins = [t.detach().to(device).requires_grad_(t.is_floating_point()) if t is not None else None
           for t in (q, k, v, mask)]
    with OpLog() as log:
        out = F.scaled_dot_product_attention(*ins[:3], attn_mask=ins[3], **kwargs)
        wrt = [t for t in ins if t is not None and t.requires_grad]
        grads = torch.autograd.grad(out, wrt, _randn(*out.shape, seed=grad_seed, dtype=out.dtype).to(device))
    return out.detach(), grads, log.ops


def _choice(q, k, v, mask=None, **kwargs):
    to = lambda t: t.to(DEVICE) if t is not None else None  # noqa: E731
    return torch._fused_sdp_choice(to(q), to(k), to(v), to(mask), **kwargs)


def _compare(q, k, v, mask=None, backend=SDPBackend.OVERRIDEABLE, **kwargs):
    """`backend`: the one openreg must use; None where it depends on the torch release."""
    try:
        out_c, grads_c, _ = _sdpa("cpu", q, k, v, mask, **kwargs)
    except RuntimeError as e:  # what this torch refuses before any backend runs is refused on openreg too
        with pytest.raises(RuntimeError, match=re.escape(str(e).split("\n")[0])):
            _sdpa(DEVICE, q, k, v, mask, **kwargs)
        return
    out_d, grads_d, ops = _sdpa(DEVICE, q, k, v, mask, **kwargs)
    fused = FUSED in ops and FUSED_BACKWARD in ops
    if backend is not None:
        assert fused == (backend == SDPBackend.OVERRIDEABLE), ops
    assert out_d.device == DEVICE and out_d.dtype == out_c.dtype and out_d.shape == out_c.shape
    tol = _tol(q.dtype)
    torch.testing.assert_close(out_d.cpu(), out_c, **tol)
    assert len(grads_d) == len(grads_c)
    for i, (gd, gc) in enumerate(zip(grads_d, grads_c, strict=True)):
        assert gd.device == DEVICE and gd.dtype == gc.dtype
        torch.testing.assert_close(gd.cpu(), gc, **tol, msg=lambda m, i=i: f"grad of input {i}: {m}")


def _case(name, dtype):
    B, H, L, S, E = 2, 3, 5, 7, 8
    q, k, v = _randn(B, H, L, E, seed=1), _randn(B, H, S, E, seed=2), _randn(B, H, S, E, seed=3)
    mask, kw = None, {}
    if name == "float_mask":
        mask = _randn(B, H, L, S, seed=4)
    elif name == "broadcast_float_mask":  # its gradient is summed over the broadcast dimensions
        mask = _randn(1, H, 1, S, seed=4)
    elif name == "bool_mask":
        mask = _randn(L, S, seed=4) > -0.5
        mask[:, 0] = True
    elif name == "fully_masked_row":  # the math backend gives zeros there, not NaN
        mask = _randn(B, 1, L, S, seed=4) > -0.5
        mask[:, :, 2] = False
    elif name == "causal":  # L != S: the causal mask is aligned to the top left
        kw["is_causal"] = True
    elif name == "causal_and_mask":  # 2.13's CPU flash kernel applies both (its math backend, and 2.14, refuse)
        mask, kw["is_causal"] = _randn(B, H, L, S, seed=4) > -0.5, True
        mask[..., 0] = True
    elif name == "scale":
        kw["scale"] = 0.3
    elif name == "negative_scale":
        kw["scale"] = -0.5
    elif name == "gqa_same_heads":
        kw["enable_gqa"] = True
    elif name == "value_head_dim":
        v = _randn(B, H, S, 4, seed=3)
    elif name == "three_d":
        q, k, v = q[0], k[0], v[0]
    elif name == "transposed":  # (B, L, H, E) storage, as attention layers make it
        q, k, v = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v))
    elif name == "longer":
        q, k, v = _randn(2, 4, 33, 16, seed=1), _randn(2, 4, 40, 16, seed=2), _randn(2, 4, 40, 16, seed=3)
        kw["is_causal"] = True
    else:
        assert name == "plain"
    cast = lambda t: t.to(dtype) if t is not None and t.is_floating_point() else t  # noqa: E731
    return cast(q), cast(k), cast(v), cast(mask), kw


CASES = ["plain", "float_mask", "broadcast_float_mask", "bool_mask", "fully_masked_row", "causal", "causal_and_mask",
         "scale", "negative_scale", "gqa_same_heads", "value_head_dim", "three_d", "transposed", "longer"]


@pytest.mark.parametrize("dtype", [torch.float32, *LOW], ids=str)
@pytest.mark.parametrize("name", CASES)
def test_fused_matches_cpu(name, dtype):
    q, k, v, mask, kw = _case(name, dtype)
    assert _choice(q, k, v, mask, **kw) == SDPBackend.OVERRIDEABLE.value
    _compare(q, k, v, mask, **kw)


def _math_case(name):
    q, k, v = _randn(2, 3, 5, 8, seed=1), _randn(2, 3, 7, 8, seed=2), _randn(2, 3, 7, 8, seed=3)
    kw = {}
    if name == "five_d":
        q, k, v = (t.unsqueeze(0).expand(2, *t.shape).contiguous() for t in (q, k, v))
    elif name == "gqa":  # the fused op takes no enable_gqa
        k, v = k[:, :1], v[:, :1]
        kw["enable_gqa"] = True
    elif name == "broadcast_batch":
        k, v = k[:1], v[:1]
    elif name == "float64":  # the op's logsumexp is float32
        q, k, v = q.double(), k.double(), v.double()
    elif name == "empty_sequence":
        k, v = k[:, :, :0], v[:, :, :0]
    elif name == "three_d_value_head_dim":  # torch's meta kernel lays out only 4-D outputs of another width
        q, k, v = q[0], k[0], _randn(3, 7, 4, seed=3)
    return q, k, v, kw


@pytest.mark.parametrize(
    "name", ["five_d", "gqa", "broadcast_batch", "float64", "empty_sequence", "three_d_value_head_dim"]
)
def test_unsupported_inputs_take_math(name):
    q, k, v, kw = _math_case(name)
    assert _choice(q, k, v, **kw) == SDPBackend.MATH.value
    # torch 2.14's SDPA makes 3-D inputs 4-D before it chooses, which the fused kernel takes; 2.13's passes them on.
    _compare(q, k, v, backend=None if name == "three_d_value_head_dim" else SDPBackend.MATH, **kw)


def test_sdpa_kernel_selects_backends():
    q, k, v, mask, kw = _case("float_mask", torch.float32)
    with sdpa_kernel([SDPBackend.MATH]):
        assert _choice(q, k, v, mask) == SDPBackend.MATH.value
        _compare(q, k, v, mask, backend=SDPBackend.MATH)
    out_c, grads_c, _ = _sdpa("cpu", q, k, v, mask)  # the CPU has no OVERRIDEABLE kernel
    with sdpa_kernel([SDPBackend.OVERRIDEABLE]):
        assert _choice(q, k, v, mask) == SDPBackend.OVERRIDEABLE.value
        out_d, grads_d, ops = _sdpa(DEVICE, q, k, v, mask)
    assert FUSED in ops and FUSED_BACKWARD in ops
    for d, c in zip((out_d, *grads_d), (out_c, *grads_c), strict=True):
        torch.testing.assert_close(d.cpu(), c)
    five_d = [t.to(DEVICE).unsqueeze(0) for t in (q, k, v)]
    with sdpa_kernel([SDPBackend.OVERRIDEABLE]), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match="No available kernel"):
            F.scaled_dot_product_attention(*five_d)
    assert any("not all 3-D or 4-D" in str(w.message) for w in caught)
    # FLASH is a backend of CUDA's and the CPU's, not openreg's: both of openreg's are off.
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]), pytest.raises(RuntimeError, match="No viable backend"):
        F.scaled_dot_product_attention(*(t.to(DEVICE) for t in (q, k, v)))


def test_with_every_backend_off_the_error_is_the_cpus():
    def errors(device):
        x = _randn(2, 3, 4, seed=0).to(device)
        messages = []
        with sdpa_kernel([SDPBackend.ERROR]):
            for call in (torch._fused_sdp_choice, F.scaled_dot_product_attention):
                with pytest.raises(RuntimeError) as raised:
                    call(x, x, x)
                messages.append(str(raised.value))
        return messages

    assert errors(DEVICE) == errors("cpu")


class _DataDependentBatch(torch.nn.Module):
    def forward(self, x):
        x = x[x.sum(dim=(-1, -2)) != 0]  # an unbacked batch size under torch.export
        q = x.view(-1, 1, 4, 8).transpose(1, 2)
        mask = torch.ones((x.shape[0], 1, 1, 1), dtype=torch.bool, device=x.device)
        return F.scaled_dot_product_attention(q, q, q, attn_mask=mask)


def test_an_unbacked_batch_exports_and_runs_as_on_the_cpu():
    # The choice takes an unbacked size as non-empty instead of guarding on it (PyTorch's
    # test_transformers.py::test_sdpa_export_unbacked_attn_mask); the program then runs any batch, empty too.
    x = _randn(4, 4, 8, seed=0)
    x[0] = 0
    programs = {d: torch.export.export(_DataDependentBatch(), (x.to(d),)).module() for d in ("cpu", DEVICE)}
    for inputs in (x, torch.zeros(4, 4, 8), _randn(4, 4, 8, seed=1)):
        expected = programs["cpu"](inputs)
        torch.testing.assert_close(programs[DEVICE](inputs.to(DEVICE)).cpu(), expected)


def _meta_like(t):
    return None if t is None else torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")


def _assert_like_meta(got, meta, what):
    assert len(got) == len(meta)
    for i, (g, m) in enumerate(zip(got, meta, strict=True)):
        if not isinstance(m, torch.Tensor):
            assert g == m if m is not None else g is None, f"{what} output {i}: {g!r} vs meta {m!r}"
            continue
        assert isinstance(g, torch.Tensor), f"{what} output {i}: {g!r} vs a tensor from the meta kernel"
        assert (g.shape, g.stride(), g.dtype) == (m.shape, m.stride(), m.dtype), f"{what} output {i}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "value_head_dim", "three_d"])
@pytest.mark.parametrize("bias", [None, "full", "broadcast"])
def test_outputs_have_the_meta_layout(layout, bias, dtype):
    """Compiled graphs plan buffers from torch's meta kernels: the kernels' outputs match them."""
    q, k, v = _randn(2, 3, 5, 8, seed=1), _randn(2, 3, 7, 8, seed=2), _randn(2, 3, 7, 8, seed=3)
    if layout == "transposed":
        q, k, v = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v))
    elif layout == "value_head_dim":
        q, v = q.transpose(1, 2).contiguous().transpose(1, 2), _randn(2, 3, 7, 4, seed=3)
    elif layout == "three_d":
        q, k, v = q[0], k[0], v[0]
    b = {None: None, "full": _randn(*q.shape[:-1], 7, seed=4), "broadcast": _randn(3, 1, 7, seed=4)}[bias]
    q, k, v = (t.to(dtype) for t in (q, k, v))
    b = b.to(dtype) if b is not None else None
    dev = [t.to(DEVICE) if t is not None else None for t in (q, k, v, b)]
    meta = [_meta_like(t) for t in dev]

    fwd = torch.ops.aten._scaled_dot_product_fused_attention_overrideable
    got = fwd(*dev, scale=0.5)
    _assert_like_meta(got, fwd(*meta, scale=0.5), "forward")

    bwd = torch.ops.aten._scaled_dot_product_fused_attention_overrideable_backward
    grad_out = _randn(*got[0].shape, seed=5).to(dtype).to(DEVICE)

    def backward_args(t, outs):
        out, lse, cq, ck, mq, mk, seed, offset, _ = outs
        return (t(grad_out), *(t(x) for x in dev[:3]), t(dev[3]), [True] * 4, t(out), t(lse), cq, ck, mq, mk,
                0.0, False, t(seed), t(offset))

    grads = bwd(*backward_args(lambda x: x, got), scale=0.5)
    _assert_like_meta(grads, bwd(*backward_args(_meta_like, got), scale=0.5), "backward")


def _fused_with_dropout(q, seed, p):
    torch.manual_seed(seed)
    x = q.to(DEVICE)
    return torch.ops.aten._scaled_dot_product_fused_attention_overrideable(x, x, x, dropout_p=p,
                                                                          return_debug_mask=True)


def test_dropout_draws_from_openregs_generator():
    p = 0.3
    q = _randn(2, 3, 64, 16, seed=1)
    first, again, other = (_fused_with_dropout(q, s, p) for s in (1, 1, 2))
    torch.testing.assert_close(again[0].cpu(), first[0].cpu(), rtol=0, atol=0)
    assert not torch.equal(other[0].cpu(), first[0].cpu())
    # The attention weights after dropout: no weight of this softmax is 0 unless dropped.
    dropped = (first[-1] == 0).float().mean().item()
    n = first[-1].numel()
    assert abs(dropped - p) < 5 * (p * (1 - p) / n) ** 0.5, dropped
    assert torch.all(_fused_with_dropout(q, 1, 0.0)[-1].cpu() > 0)


@pytest.mark.parametrize("mask", [False, True])
def test_dropout_matches_cpu_math_with_the_same_mask(mask):
    """The fused kernel's dropout mask, read from its debug output, given to the CPU's math backend
    (its dropout_mask argument, for testing fused kernels) gives openreg's output and gradients: the
    backward redraws the forward's mask from the kept seed."""
    p, seed = 0.4, 11
    q, k, v = _randn(2, 3, 6, 8, seed=1), _randn(2, 3, 9, 8, seed=2), _randn(2, 3, 9, 8, seed=3)
    bias = _randn(2, 3, 6, 9, seed=4) if mask else None
    torch.manual_seed(seed)
    debug = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(
        q.to(DEVICE), k.to(DEVICE), v.to(DEVICE), None if bias is None else bias.to(DEVICE), dropout_p=p,
        return_debug_mask=True)[-1]
    keep = debug.cpu() != 0
    torch.manual_seed(seed)
    out_d, grads_d, ops = _sdpa(DEVICE, q, k, v, bias, dropout_p=p)
    assert FUSED in ops and FUSED_BACKWARD in ops

    ins = [t.clone().requires_grad_() for t in (q, k, v) + ((bias,) if mask else ())]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Dropout mask should only be used for testing")
        out_c = torch.ops.aten._scaled_dot_product_attention_math(
            *ins[:3], ins[3] if mask else None, dropout_p=p, dropout_mask=keep)[0]
    grads_c = torch.autograd.grad(out_c, ins, _randn(*out_c.shape, seed=100))
    torch.testing.assert_close(out_d.cpu(), out_c.detach())
    for gd, gc in zip(grads_d, grads_c, strict=True):
        torch.testing.assert_close(gd.cpu(), gc)


def test_dropout_one_drops_everything_as_on_cpu():
    q = _randn(2, 3, 5, 8, seed=1)
    out_c, grads_c, _ = _sdpa("cpu", q, q, q, dropout_p=1.0)
    out_d, grads_d, ops = _sdpa(DEVICE, q, q, q, dropout_p=1.0)
    assert FUSED in ops
    torch.testing.assert_close(out_d.cpu(), out_c)
    torch.testing.assert_close(grads_d[0].cpu(), grads_c[0])


def test_dropout_above_one_raises_as_on_cpu():
    q = _randn(2, 3, 5, 8, seed=1)
    _compare(q, q, q, dropout_p=1.5, backend=None)


def test_training_step_with_mask_gradient_and_no_grad_inference():
    """The fused forward alone under no_grad, and a mask that needs no gradient while q, k, v do."""
    q, k, v, mask, _ = _case("float_mask", torch.float32)
    with torch.no_grad(), OpLog() as log:
        out = F.scaled_dot_product_attention(q.to(DEVICE), k.to(DEVICE), v.to(DEVICE), attn_mask=mask.to(DEVICE))
    assert log.ops.count(FUSED) == 1
    torch.testing.assert_close(out.cpu(), F.scaled_dot_product_attention(q, k, v, attn_mask=mask))

    x = q.to(DEVICE).requires_grad_()
    out = F.scaled_dot_product_attention(x, k.to(DEVICE), v.to(DEVICE), attn_mask=mask.to(DEVICE))
    out.sum().backward()
    xc = q.clone().requires_grad_()
    F.scaled_dot_product_attention(xc, k, v, attn_mask=mask).sum().backward()
    torch.testing.assert_close(x.grad.cpu(), xc.grad)


def test_fused_kernels_queue_on_the_stream():
    """Forward and backward return before the device has run them, as on CUDA (from the second call of a
    signature: openreg makes each signature's first call at the call, to raise its errors there)."""
    q = _randn(2, 3, 5, 8, seed=1).to(DEVICE).requires_grad_()
    mask = _randn(2, 1, 5, 5, seed=2).to(DEVICE).requires_grad_()
    grad = _randn(2, 3, 5, 8, seed=3).to(DEVICE)
    for _ in range(3):
        torch.openreg.synchronize()
        torch.openreg._sleep(400_000_000)  # the stream is busy meanwhile
        start = time.perf_counter()
        out = F.scaled_dot_product_attention(q, q, q, attn_mask=mask, dropout_p=0.2)
        torch.autograd.grad(out, (q, mask), grad)
        elapsed = time.perf_counter() - start
    assert elapsed < 0.2
