"""Models compiled with torch.compile on openreg compute what the same models compute eagerly on the CPU:
outputs, input and parameter gradients, buffers, and a few steps of training.

Each model is built once on the CPU; a deep copy moves to openreg and is compiled, and both run on the
same inputs (generated on the CPU, then moved). Shapes are tiny: compiling dominates the run time.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from compile_helpers import (
    DEVICE,
    TOL,
    assert_close_cpu,
    assert_openreg_kernels,
    compare_compiled_model,
    generated_code,
    reset,
)

from openreg_runtime.testing.models import MLP, ConvBN


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    reset()
    yield
    reset()


class TransformerBlock(nn.Module):
    def __init__(self, dim=16, heads=2):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


class EmbeddingLSTM(nn.Module):
    def __init__(self, eager_lstm=False):
        super().__init__()
        self.embed = nn.Embedding(20, 8)
        self.lstm = nn.LSTM(8, 16, batch_first=True)
        self.head = nn.Linear(16, 4)
        self.eager_lstm = eager_lstm

    @torch.compiler.disable
    def _lstm_eagerly(self, x):
        return self.lstm(x)

    def forward(self, tokens):
        x = self.embed(tokens)
        # Dynamo traces RNN modules only with allow_rnn (without it, it gives up on the whole frame);
        # eager_lstm runs the LSTM eagerly between two compiled graphs (embedding, head) instead.
        out, (h, c) = self._lstm_eagerly(x) if self.eager_lstm else self.lstm(x)
        return self.head(out), h, c


def _floats(*shape):
    return lambda g: [torch.randn(*shape, generator=g).requires_grad_()]


def _tokens(*shape):
    return lambda g: [torch.randint(0, 20, shape, generator=g)]


# name -> (constructor, inputs from a CPU generator, Dynamo config)
MODELS = {
    "mlp": (MLP, _floats(8, 16), {}),
    "cnn_batchnorm_train": (ConvBN, _floats(4, 3, 8, 8), {}),
    "transformer_sdpa": (TransformerBlock, _floats(2, 5, 16), {}),
    "embedding_lstm": (EmbeddingLSTM, _tokens(3, 6), {"allow_rnn": True}),
    "embedding_eager_lstm": (lambda: EmbeddingLSTM(eager_lstm=True), _tokens(3, 6), {}),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_compiled_model_matches_eager_cpu(name):
    make, inputs, dynamo_config = MODELS[name]
    with torch._dynamo.config.patch(dynamo_config):
        codes = compare_compiled_model(make, inputs)
    assert_openreg_kernels(codes, expected_graphs=2)  # a forward and a backward graph at least


class MaskedAttention(nn.Module):
    """Attention over a (B, L, H, E) projection with a learned additive mask, broadcast over the batch."""

    def __init__(self, dim=16, heads=2, length=5):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.bias = nn.Parameter(0.1 * torch.randn(1, heads, length, length))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        attn = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                              attn_mask=self.bias)
        return attn.transpose(1, 2).reshape(b, t, d)


@pytest.mark.parametrize("dynamic", [False, True])
def test_compiled_attention_calls_openregs_fused_kernels(dynamic):
    """SDPA on openreg compiles to Inductor's fallback calls of openreg's fused attention kernels
    (SDPBackend.OVERRIDEABLE), forward and backward, whose outputs match the layouts of torch's meta kernels
    that the generated code asserts."""
    codes = compare_compiled_model(MaskedAttention, _floats(2, 5, 16), compile_kwargs=dict(dynamic=dynamic))
    code = "\n".join(codes)
    assert "aten._scaled_dot_product_fused_attention_overrideable.default(" in code
    assert "aten._scaled_dot_product_fused_attention_overrideable_backward.default(" in code


def test_mlp_max_autotune_matches_eager_cpu():
    codes = compare_compiled_model(MLP, _floats(8, 16), compile_kwargs=dict(mode="max-autotune-no-cudagraphs"))
    assert_openreg_kernels(codes, expected_graphs=2)


def test_mlp_reduce_overhead_compiles_as_the_default_mode():
    """Inductor's CUDA-graph trees are CUDA's only: mode="reduce-overhead" gives openreg kernels and the CPU's
    results, as the default mode does (README, "torch.compile")."""
    codes = compare_compiled_model(MLP, _floats(8, 16), compile_kwargs=dict(mode="reduce-overhead"))
    assert_openreg_kernels(codes, expected_graphs=2)


def _fx_function(x, w, b):
    y = torch.addmm(b, x, w).relu()
    return (y * torch.sigmoid(y)).sum(dim=1, keepdim=True) + x.mean(dim=0)[:1]


def test_compile_fx_on_symbolic_trace():
    from torch._inductor.compile_fx import compile_fx

    g = torch.Generator().manual_seed(0)
    cpu_inputs = [torch.randn(6, 8, generator=g), torch.randn(8, 5, generator=g), torch.randn(5, generator=g)]
    dev_inputs = [t.to(DEVICE) for t in cpu_inputs]
    gm = torch.fx.symbolic_trace(_fx_function)
    with generated_code() as codes:
        compiled = compile_fx(gm, dev_inputs)
    got = compiled(*dev_inputs)
    if isinstance(got, (tuple, list)):  # compile_fx may return the graph's output wrapped
        assert len(got) == 1
        got = got[0]
    assert got.device.type == DEVICE
    assert_close_cpu(got, _fx_function(*cpu_inputs))
    assert_openreg_kernels(codes)
    # Called again on other values of the same shapes, it still computes (no stale result).
    cpu_inputs2 = [t * 2 - 1 for t in cpu_inputs]
    got2 = compiled(*[t.to(DEVICE) for t in cpu_inputs2])
    got2 = got2[0] if isinstance(got2, (tuple, list)) else got2
    assert_close_cpu(got2, _fx_function(*cpu_inputs2))


STEPS = 3


def _train(model, device, compile_loss, xs, ys):
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def loss_fn(x, y):
        return F.cross_entropy(model(x), y)

    step_loss = torch.compile(loss_fn) if compile_loss else loss_fn
    losses = []
    for x, y in zip(xs, ys, strict=True):
        opt.zero_grad(set_to_none=True)
        loss = step_loss(x.to(device), y.to(device))
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return torch.stack(losses).cpu()


def test_compiled_mlp_trains_like_eager_cpu():
    torch.manual_seed(0)
    cpu_model = MLP()
    dev_model = copy.deepcopy(cpu_model).to(DEVICE)
    g = torch.Generator().manual_seed(1)
    xs = [torch.randn(8, 16, generator=g) for _ in range(STEPS)]
    ys = [torch.randint(0, 4, (8,), generator=g) for _ in range(STEPS)]

    cpu_losses = _train(cpu_model, "cpu", False, xs, ys)
    with generated_code() as codes:
        dev_losses = _train(dev_model, DEVICE, True, xs, ys)
    assert_openreg_kernels(codes, expected_graphs=2)

    # The loss changes as the weights do: the loop really trained.
    assert not torch.equal(cpu_losses[0], cpu_losses[-1])
    torch.testing.assert_close(dev_losses, cpu_losses, **TOL, msg=lambda m: f"losses per step differ: {m}")
    cpu_state, dev_state = cpu_model.state_dict(), dev_model.state_dict()
    assert cpu_state.keys() == dev_state.keys()
    for k, ref in cpu_state.items():
        assert dev_state[k].device.type == DEVICE
        assert_close_cpu(dev_state[k], ref, what=k)
