"""Neural-network ops on openreg match the CPU, forward and backward.

Every check runs one function on CPU tensors and on copies of them on
openreg, then compares the outputs, the input gradients and (for modules) the
parameter gradients and buffers.
"""

from __future__ import annotations

import copy
import re

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils._pytree import tree_leaves

import openreg_eager  # noqa: F401  (registers the openreg kernels)

DEVICE = torch.device("openreg:0")
TOL = dict(atol=1e-4, rtol=1e-4)


def _randn(*shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=dtype)


def _float_leaves(out):
    return [t for t in tree_leaves(out) if isinstance(t, torch.Tensor) and t.is_floating_point()]


def _compare(fn, *inputs, module=None, tol=TOL, grad=True, no_grad=()):
    """Runs fn(*inputs) (fn(module, *inputs) with a module) on cpu and openreg and compares
    outputs, gradients of floating inputs (except the positions in no_grad) and parameters,
    and buffers."""

    def prepare(i, t, device):
        if not isinstance(t, torch.Tensor):
            return t
        t = t.detach().to(device)
        return t.requires_grad_(grad and t.is_floating_point() and i not in no_grad)

    cpu_in = [prepare(i, t, "cpu") for i, t in enumerate(inputs)]
    dev_in = [prepare(i, t, DEVICE) for i, t in enumerate(inputs)]
    cpu_mod = module
    dev_mod = copy.deepcopy(module).to(DEVICE) if module is not None else None
    args_c = ([cpu_mod] if module is not None else []) + cpu_in
    args_d = ([dev_mod] if module is not None else []) + dev_in

    out_c, out_d = fn(*args_c), fn(*args_d)
    leaves_c, leaves_d = tree_leaves(out_c), tree_leaves(out_d)
    assert len(leaves_c) == len(leaves_d)
    for i, (c, d) in enumerate(zip(leaves_c, leaves_d, strict=False)):
        if isinstance(c, torch.Tensor):
            assert d.device == DEVICE, f"output {i} is on {d.device}"
            assert d.dtype == c.dtype and d.shape == c.shape, (
                f"output {i}: {d.dtype}{list(d.shape)} vs cpu {c.dtype}{list(c.shape)}"
            )
            torch.testing.assert_close(d.detach().cpu(), c.detach(), **tol, msg=lambda m, i=i: f"output {i}: {m}")
        else:
            assert d == c

    if dev_mod is not None:
        for (name, bc), (_, bd) in zip(cpu_mod.named_buffers(), dev_mod.named_buffers(), strict=False):
            torch.testing.assert_close(bd.cpu(), bc, **tol, msg=lambda m, n=name: f"buffer {n}: {m}")
    if not grad:
        return out_d

    outs_c = [t for t in _float_leaves(out_c) if t.requires_grad]
    outs_d = [t for t in _float_leaves(out_d) if t.requires_grad]
    if not outs_c:
        return out_d
    grads_out = [_randn(*t.shape, seed=100 + i, dtype=t.dtype) for i, t in enumerate(outs_c)]
    wrt_c = [t for t in tree_leaves(cpu_in) if isinstance(t, torch.Tensor) and t.requires_grad]
    wrt_d = [t for t in tree_leaves(dev_in) if isinstance(t, torch.Tensor) and t.requires_grad]
    names = [f"input {i}" for i in range(len(wrt_c))]
    if module is not None:
        wrt_c += [p for p in cpu_mod.parameters() if p.requires_grad]
        wrt_d += [p for p in dev_mod.parameters() if p.requires_grad]
        names += [n for n, p in cpu_mod.named_parameters() if p.requires_grad]
    g_c = torch.autograd.grad(outs_c, wrt_c, grads_out, allow_unused=True)
    g_d = torch.autograd.grad(outs_d, wrt_d, [g.to(DEVICE) for g in grads_out], allow_unused=True)
    for name, c, d in zip(names, g_c, g_d, strict=False):
        if c is None:
            assert d is None, f"grad of {name}"
            continue
        assert d.device == DEVICE
        torch.testing.assert_close(d.cpu(), c, **tol, msg=lambda m, n=name: f"grad of {n}: {m}")
    return out_d


# --------------------------------------------------------------------------- attention


@pytest.mark.parametrize(
    "variant",
    ["plain", "bool_mask", "float_mask", "causal", "scale", "broadcast_mask", "gqa"],
)
def test_scaled_dot_product_attention(variant):
    B, H, L, S, E = 2, 4, 5, 7, 8
    q, k, v = _randn(B, H, L, E, seed=1), _randn(B, H, S, E, seed=2), _randn(B, H, S, E, seed=3)
    kwargs = {}
    if variant == "bool_mask":
        kwargs["attn_mask"] = _randn(L, S, seed=4) > -0.5
        kwargs["attn_mask"][:, 0] = True  # no fully masked rows
    elif variant == "float_mask":
        kwargs["attn_mask"] = _randn(B, H, L, S, seed=4)
    elif variant == "broadcast_mask":
        kwargs["attn_mask"] = _randn(B, 1, 1, S, seed=4) > -1.0
        kwargs["attn_mask"][..., 0] = True
    elif variant == "causal":
        k, v = k[:, :, :L], v[:, :, :L]
        kwargs["is_causal"] = True
    elif variant == "scale":
        kwargs["scale"] = 0.3
    elif variant == "gqa":
        k, v = k[:, :2], v[:, :2]
        kwargs["enable_gqa"] = True

    mask = kwargs.pop("attn_mask", None)
    if mask is None:
        _compare(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **kwargs), q, k, v)
    else:
        _compare(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, **kwargs), q, k, v, mask)


def test_multihead_attention_module():
    mha = nn.MultiheadAttention(16, 4, batch_first=True)
    x = _randn(2, 6, 16)
    pad = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])
    _compare(lambda m, x, p: m(x, x, x, key_padding_mask=p), x, pad, module=mha)
    _compare(
        lambda m, x: m(
            x,
            x,
            x,
            attn_mask=nn.Transformer.generate_square_subsequent_mask(6, device=x.device),
            average_attn_weights=False,
        ),
        x,
        module=mha,
    )


@pytest.mark.parametrize("need_weights", [False, True])
def test_multihead_attention_inference_fast_path(need_weights):
    """Self-attention in eval mode without grad takes MHA's fused fast path
    (aten::_native_multi_head_attention)."""
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(16, 4, batch_first=True).eval()
    x = _randn(2, 5, 16)
    with torch.no_grad():
        _compare(lambda m, x: m(x, x, x, need_weights=need_weights), x, module=mha, grad=False)


def test_transformer_encoder_layer():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, dropout=0.0, batch_first=True)
    _compare(lambda m, x: m(x), _randn(2, 5, 16), module=layer)
    layer.eval()
    with torch.no_grad():
        _compare(lambda m, x: m(x), _randn(2, 5, 16), module=layer, grad=False)


# --------------------------------------------------------------------------- recurrent


@pytest.mark.parametrize("batch_first", [False, True], ids=["seq_first", "batch_first"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU, nn.RNN], ids=["lstm", "gru", "rnn"])
def test_recurrent_layers(cls, bidirectional, batch_first):
    torch.manual_seed(0)
    rnn = cls(6, 8, num_layers=2, bidirectional=bidirectional, batch_first=batch_first)
    x = _randn(3, 5, 6)  # (batch, seq) or (seq, batch) depending on batch_first
    dirs = 2 if bidirectional else 1
    n = x.shape[0] if batch_first else x.shape[1]
    h0 = _randn(2 * dirs, n, 8, seed=1)
    _compare(lambda m, x: m(x), x, module=rnn)
    if cls is nn.LSTM:
        c0 = _randn(2 * dirs, n, 8, seed=2)
        _compare(lambda m, x, h, c: m(x, (h, c)), x, h0, c0, module=rnn)
    else:
        _compare(lambda m, x, h: m(x, h), x, h0, module=rnn)


def test_lstm_with_projection_and_unbatched_input():
    torch.manual_seed(0)
    lstm = nn.LSTM(6, 8, num_layers=2, proj_size=4)
    _compare(lambda m, x: m(x), _randn(5, 3, 6), module=lstm)
    _compare(lambda m, x: m(x), _randn(5, 6), module=lstm)


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU], ids=["lstm", "gru"])
def test_packed_sequences(cls):
    torch.manual_seed(0)
    rnn = cls(4, 5, batch_first=True, bidirectional=True)
    x = _randn(3, 6, 4)
    lengths = torch.tensor([6, 4, 2])  # stays on the CPU, as torch requires

    def run(m, x):
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True)
        out, h = m(packed)
        padded, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
        return padded, h

    _compare(run, x, module=rnn)


@pytest.mark.parametrize("cls", [nn.LSTMCell, nn.GRUCell, nn.RNNCell], ids=["lstm", "gru", "rnn"])
def test_recurrent_cells(cls):
    torch.manual_seed(0)
    cell = cls(6, 8)
    _compare(lambda m, x: m(x), _randn(3, 6), module=cell)


# The fused cells' ops given gates or a workspace of the wrong width: CUDA's kernels check the sizes first
# (RNN.cu's checkSizes, checkGRUBackwardSizes, checkLSTMBackwardSizes; the CPU has no kernel). (call, the
# argument named, its expected size)
BAD_CELL_SIZES = {
    "gru": (lambda h: torch.ops.aten._thnn_fused_gru_cell(_randn(2, 4).to(DEVICE), _randn(2, 4).to(DEVICE), h),
            "#5 'prev_hidden' to have 2 elements"),
    "lstm": (lambda h: torch.ops.aten._thnn_fused_lstm_cell(_randn(2, 6).to(DEVICE), _randn(2, 6).to(DEVICE), h),
             "#5 'prev_hidden' to have 3 elements"),
    "lstm bias": (lambda h: torch.ops.aten._thnn_fused_lstm_cell(
        _randn(2, 16).to(DEVICE), _randn(2, 16).to(DEVICE), h, _randn(15).to(DEVICE), _randn(15).to(DEVICE)),
        "#3 'input_bias' to have 16 elements"),
    "gru backward": (lambda h: torch.ops.aten._thnn_fused_gru_cell_backward(h, _randn(2, 4).to(DEVICE), False),
                     "of size [2, 20], but got tensor of size [2, 4] for argument #2 'workspace'"),
    "lstm backward": (lambda h: torch.ops.aten._thnn_fused_lstm_cell_backward_impl(
        h, None, h, h, _randn(2, 4).to(DEVICE), False), "#5 'workspace' to have 32 elements"),
}


@pytest.mark.parametrize("case", BAD_CELL_SIZES)
def test_fused_cells_check_their_sizes_as_cudas_kernels_do(case):
    call, message = BAD_CELL_SIZES[case]
    with pytest.raises(RuntimeError, match=re.escape(message)):
        call(_randn(2, 4).to(DEVICE))
    torch.openreg.synchronize()


# --------------------------------------------------------------------------- convolutions


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(),
        dict(stride=2, padding=1),
        dict(padding="same", dilation=2),
        dict(groups=2, bias=False),
        dict(stride=(2, 1), padding=(0, 2), padding_mode="reflect"),
    ],
    ids=["plain", "stride_pad", "same_dilation", "groups", "reflect"],
)
def test_conv2d(kwargs):
    torch.manual_seed(0)
    conv = nn.Conv2d(4, 6, 3, **kwargs)
    _compare(lambda m, x: m(x), _randn(2, 4, 9, 8), module=conv)


def test_conv2d_functional_and_channels_last():
    x, w, b = _randn(2, 3, 7, 7), _randn(5, 3, 3, 3, seed=1), _randn(5, seed=2)
    _compare(lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1), x, w, b)
    _compare(lambda x, w: F.conv2d(x.contiguous(memory_format=torch.channels_last), w), x, w)


def test_conv1d_and_conv3d():
    torch.manual_seed(0)
    _compare(lambda m, x: m(x), _randn(2, 3, 11), module=nn.Conv1d(3, 4, 3, padding=1, stride=2))
    _compare(lambda m, x: m(x), _randn(1, 2, 5, 5, 5), module=nn.Conv3d(2, 3, 3))


@pytest.mark.parametrize(
    "kwargs",
    [dict(), dict(stride=2, padding=1, output_padding=1), dict(groups=2, dilation=2)],
    ids=["plain", "stride_outpad", "groups_dilation"],
)
def test_conv_transpose2d(kwargs):
    torch.manual_seed(0)
    conv = nn.ConvTranspose2d(4, 6, 3, **kwargs)
    _compare(lambda m, x: m(x), _randn(2, 4, 5, 6), module=conv)


def test_conv_transpose1d():
    torch.manual_seed(0)
    _compare(lambda m, x: m(x), _randn(2, 3, 7), module=nn.ConvTranspose1d(3, 2, 4, stride=2))


# --------------------------------------------------------------------------- softmax and losses


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_log_softmax(dim):
    x = _randn(4, 5, 6) * 3
    _compare(lambda x: F.softmax(x, dim=dim), x)
    _compare(lambda x: F.log_softmax(x, dim=dim), x)
    _compare(lambda x: F.softmax(x, dim=dim, dtype=torch.float64), x)
    _compare(lambda x: x.t().softmax(0) if x.dim() == 2 else x.transpose(0, 2).log_softmax(dim), x)


def test_softmax_half_precision_forward():
    x = _randn(8, 33) * 4
    _compare(lambda x: F.softmax(x.to(torch.bfloat16), -1).float(), x, tol=dict(atol=1e-2, rtol=1e-2))


@pytest.mark.parametrize(
    ("op", "dtype"),
    [(torch._softmax, torch.float16), (torch._softmax, torch.bfloat16), (torch._log_softmax, torch.float16)],
    ids=["softmax-float16", "softmax-bfloat16", "log_softmax-float16"],
)
def test_half_to_float_is_computed_as_cuda_does(op, dtype):
    """CUDA's kernel (the CPU's refuses it) reads the narrow input and writes float32; its backward takes a
    float32 gradient and returns the input's dtype. The reference: the CPU's float32 op on the widened input."""
    x, grad = _randn(6, 9, dtype=dtype) * 3, _randn(6, 9, seed=1)
    leaf = x.to(DEVICE).requires_grad_()
    got = op(leaf, 1, True)
    got.backward(grad.to(DEVICE))
    wide = x.float().requires_grad_()
    expected = op(wide, 1, False)
    expected.backward(grad)
    assert got.dtype == torch.float32 and leaf.grad.dtype == dtype
    torch.testing.assert_close(got.cpu(), expected)
    torch.testing.assert_close(leaf.grad.cpu(), wide.grad.to(dtype))
    out = torch.empty(0, device=DEVICE)
    assert op(x.to(DEVICE), 1, True, out=out) is out
    torch.testing.assert_close(out.cpu(), expected.detach())
    backward, out_name = (
        (torch.ops.aten._log_softmax_backward_data.out, "out")
        if op is torch._log_softmax
        else (torch.ops.aten._softmax_backward_data.out, "grad_input")
    )
    grad_input = torch.empty(0, dtype=dtype, device=DEVICE)
    backward(grad.to(DEVICE), got.detach(), 1, dtype, **{out_name: grad_input})
    torch.testing.assert_close(grad_input.cpu(), wide.grad.to(dtype))


@pytest.mark.parametrize(
    ("op", "dtype"),
    [(torch._softmax, torch.float32), (torch._log_softmax, torch.bfloat16), (torch._log_softmax, torch.float64)],
    ids=["softmax-float32", "log_softmax-bfloat16", "log_softmax-float64"],
)
def test_half_to_float_of_another_dtype_is_refused(op, dtype):
    with pytest.raises(RuntimeError, match="^conversion is supported for Half"):
        op(torch.ones(2, 3, dtype=dtype, device=DEVICE), 1, True)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(),
        dict(reduction="sum"),
        dict(reduction="none"),
        dict(ignore_index=2),
        dict(label_smoothing=0.1),
        dict(weight=True),
        dict(weight=True, ignore_index=0, reduction="mean"),
    ],
    ids=["mean", "sum", "none", "ignore_index", "label_smoothing", "weight", "weight_ignore"],
)
def test_cross_entropy(kwargs):
    logits = _randn(8, 5)
    target = torch.tensor([0, 1, 2, 3, 4, 2, 0, 1])
    if kwargs.pop("weight", False):
        weight = torch.rand(5, generator=torch.Generator().manual_seed(3)) + 0.5
        _compare(lambda x, t, w: F.cross_entropy(x, t, weight=w, **kwargs), logits, target, weight, no_grad=(2,))
    else:
        _compare(lambda x, t: F.cross_entropy(x, t, **kwargs), logits, target)


def test_cross_entropy_spatial_and_probability_targets():
    logits = _randn(2, 4, 3, 3)
    target = torch.randint(0, 4, (2, 3, 3), generator=torch.Generator().manual_seed(1))
    _compare(lambda x, t: F.cross_entropy(x, t), logits, target)
    probs = _randn(6, 5, seed=2).softmax(-1)
    _compare(lambda x, p: F.cross_entropy(x, p, label_smoothing=0.05), _randn(6, 5), probs, no_grad=(1,))


@pytest.mark.parametrize(
    "loss",
    [
        pytest.param(lambda x, y: F.mse_loss(x, y), id="mse_mean"),
        pytest.param(lambda x, y: F.mse_loss(x, y, reduction="sum"), id="mse_sum"),
        pytest.param(lambda x, y: F.mse_loss(x, y, reduction="none"), id="mse_none"),
        pytest.param(lambda x, y: F.l1_loss(x, y), id="l1"),
        pytest.param(lambda x, y: F.smooth_l1_loss(x, y, beta=0.5), id="smooth_l1"),
        pytest.param(lambda x, y: F.huber_loss(x, y, delta=0.7), id="huber"),
        pytest.param(lambda x, y: F.binary_cross_entropy_with_logits(x, (y > 0).float()), id="bce_with_logits"),
        pytest.param(lambda x, y: F.binary_cross_entropy(torch.sigmoid(x), torch.sigmoid(y)), id="bce"),
        pytest.param(lambda x, y: F.kl_div(F.log_softmax(x, -1), F.softmax(y, -1), reduction="batchmean"), id="kl_div"),
        pytest.param(lambda x, y: F.nll_loss(F.log_softmax(x, -1), (y[:, 0].abs() * 2).long().clamp(max=3)), id="nll"),
        pytest.param(lambda x, y: F.cosine_embedding_loss(x, y, torch.sign(y[:, 0])), id="cosine_embedding"),
    ],
)
def test_other_losses(loss):
    _compare(loss, _randn(6, 4), _randn(6, 4, seed=1))


# --------------------------------------------------------------------------- embedding


def test_embedding():
    torch.manual_seed(0)
    idx = torch.tensor([[0, 2, 4, 2], [9, 0, 1, 0]])
    _compare(lambda m, i: m(i), idx, module=nn.Embedding(10, 3))
    _compare(lambda m, i: m(i), idx, module=nn.Embedding(10, 3, padding_idx=0))
    _compare(lambda w, i: F.embedding(i, w, scale_grad_by_freq=True), _randn(10, 3), idx)


def test_embedding_max_norm_renormalises_weight_in_place():
    torch.manual_seed(0)
    emb = nn.Embedding(10, 4, max_norm=1.0)
    with torch.no_grad():
        emb.weight.mul_(3)
    dev = copy.deepcopy(emb).to(DEVICE)
    idx = torch.tensor([1, 3, 3, 7])
    ref = emb(idx)
    got = dev(idx.to(DEVICE))
    torch.testing.assert_close(got.detach().cpu(), ref.detach(), **TOL)
    torch.testing.assert_close(dev.weight.detach().cpu(), emb.weight.detach(), **TOL)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag(mode):
    torch.manual_seed(0)
    bag = nn.EmbeddingBag(10, 3, mode=mode)
    _compare(lambda m, i, o: m(i, o), torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]), torch.tensor([0, 3, 5]), module=bag)


# --------------------------------------------------------------------------- normalisation


@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(affine):
    torch.manual_seed(0)
    ln = nn.LayerNorm((5, 6), elementwise_affine=affine)
    if affine:
        with torch.no_grad():
            ln.weight.normal_()
            ln.bias.normal_()
    _compare(lambda m, x: m(x), _randn(3, 4, 5, 6) * 2 + 1, module=ln)
    _compare(lambda x, w, b: F.layer_norm(x, (6,), w, b, eps=1e-3), _randn(4, 6), _randn(6, seed=1), _randn(6, seed=2))


@pytest.mark.parametrize(
    "cls,shape",
    [(nn.BatchNorm1d, (8, 5)), (nn.BatchNorm1d, (4, 5, 3)), (nn.BatchNorm2d, (4, 5, 3, 3))],
    ids=["bn1d", "bn1d_seq", "bn2d"],
)
def test_batch_norm_train_and_eval(cls, shape):
    torch.manual_seed(0)
    bn = cls(5, momentum=0.2)
    with torch.no_grad():
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.normal_()
    x = _randn(*shape) * 3 + 1
    cpu_bn = bn
    dev_bn = copy.deepcopy(bn).to(DEVICE)
    # Two training steps update the running statistics identically...
    for step in range(2):
        xs = x + step
        ref = cpu_bn(xs)
        got = dev_bn(xs.to(DEVICE))
        torch.testing.assert_close(got.detach().cpu(), ref.detach(), **TOL)
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        torch.testing.assert_close(
            getattr(dev_bn, name).cpu(), getattr(cpu_bn, name), **TOL, msg=lambda m, n=name: f"{n}: {m}"
        )
    # ...and forward + backward match in both modes.
    _compare(lambda m, x: m(x), x, module=bn)
    bn.eval()
    _compare(lambda m, x: m(x), x, module=bn)


def test_batch_norm_functional_without_running_stats():
    x = _randn(6, 4, 2, 2)
    _compare(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), x, _randn(4, seed=1), _randn(4, seed=2))
    rm, rv = _randn(4, seed=3), torch.rand(4, generator=torch.Generator().manual_seed(4)) + 0.5
    _compare(lambda x, rm, rv: F.batch_norm(x, rm, rv, training=False), x, rm, rv, grad=False)


def test_group_and_instance_norm():
    torch.manual_seed(0)
    _compare(lambda m, x: m(x), _randn(2, 6, 4, 4), module=nn.GroupNorm(3, 6))
    _compare(lambda m, x: m(x), _randn(2, 3, 5, 5), module=nn.InstanceNorm2d(3, affine=True))


def test_rms_norm():
    torch.manual_seed(0)
    _compare(lambda m, x: m(x), _randn(3, 8), module=nn.RMSNorm(8))


# --------------------------------------------------------------------------- pooling, resampling, activations


def test_pooling():
    x = _randn(2, 3, 8, 7)
    _compare(lambda x: F.max_pool2d(x, 2, return_indices=True), x)
    _compare(lambda x: F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True), x)
    _compare(lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False), x)
    _compare(lambda x: F.adaptive_avg_pool2d(x, (3, 2)), x)
    _compare(lambda x: F.adaptive_max_pool2d(x, 4), x)
    _compare(lambda x: F.max_pool1d(x.flatten(2), 4), x)


def test_interpolate_and_pad():
    x = _randn(1, 2, 5, 6)
    _compare(lambda x: F.interpolate(x, scale_factor=2, mode="nearest"), x)
    _compare(lambda x: F.interpolate(x, size=(7, 9), mode="bilinear", align_corners=False), x)
    _compare(lambda x: F.interpolate(x, size=(3, 4), mode="bicubic", align_corners=True), x)
    _compare(lambda x: F.pad(x, (1, 2, 2, 1), mode="reflect"), x)
    _compare(lambda x: F.pad(x, (1, 1, 1, 1), mode="replicate"), x)
    _compare(lambda x: F.pixel_shuffle(x.repeat(1, 2, 1, 1), 2), x)


@pytest.mark.parametrize(
    "fn",
    [
        F.relu,
        F.gelu,
        lambda x: F.gelu(x, approximate="tanh"),
        F.silu,
        F.elu,
        F.leaky_relu,
        torch.tanh,
        torch.sigmoid,
        F.softplus,
        F.mish,
        F.hardswish,
        lambda x: F.glu(x, -1),
        F.logsigmoid,
        lambda x: F.prelu(x, torch.tensor([0.2]).to(x.device)),
    ],
    ids=[
        "relu",
        "gelu",
        "gelu_tanh",
        "silu",
        "elu",
        "leaky_relu",
        "tanh",
        "sigmoid",
        "softplus",
        "mish",
        "hardswish",
        "glu",
        "logsigmoid",
        "prelu",
    ],
)
def test_activations(fn):
    _compare(fn, _randn(4, 6) * 3)


def test_linear_and_bilinear():
    torch.manual_seed(0)
    _compare(lambda m, x: m(x), _randn(3, 4, 5), module=nn.Linear(5, 7))
    _compare(lambda m, a, b: m(a, b), _randn(3, 4), _randn(3, 5, seed=1), module=nn.Bilinear(4, 5, 2))


def test_clip_grad_and_weight_norm_utilities():
    torch.manual_seed(0)
    lin = nn.utils.parametrizations.weight_norm(nn.Linear(4, 3))
    _compare(lambda m, x: m(x), _randn(5, 4), module=lin)
