"""FlexAttention on openreg (openreg._torch_patches, patch 15): eagerly as on CUDA, torch's dense implementation with
its backward; compiled, through the CPU's C++ template, for inference, as on the CPU. Every result is compared with
the CPU's."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from compile_helpers import reset
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")

L = 128  # the template's block size: one block of queries and keys per head


def _causal(b, h, q, k):
    return q >= k


def _relative_bias(score, b, h, q, k):
    return score + (q - k) * 0.01


def _inputs(device, requires_grad=False):
    gen = torch.Generator().manual_seed(0)
    return [torch.randn(1, 2, L, 16, generator=gen).to(device).requires_grad_(requires_grad) for _ in range(3)]


def _attend(run, device):
    q, k, v = _inputs(device)
    mask = create_block_mask(_causal, 1, 1, L, L, device=device)
    return run(q, k, v, score_mod=_relative_bias, block_mask=mask).cpu()


@pytest.mark.parametrize("grad_mode", ["no_grad", "grad enabled, inputs without grad"])
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_forward_matches_the_cpu(compiled, grad_mode):
    # With grad enabled torch asks the kernel for the logsumexp a backward would need, which the CPU's template
    # refuses; openreg, compiled as the CPU, gets the CPU's options.
    reset()
    run = torch.compile(flex_attention) if compiled else flex_attention
    with torch.set_grad_enabled(grad_mode != "no_grad"):
        results = [_attend(run, device) for device in ("cpu", "openreg")]
    torch.testing.assert_close(results[1], results[0])


def test_eager_backward_matches_the_cpus_attention():
    # The CPU refuses FlexAttention's backward; CUDA and openreg run it. A causal mask is SDPA's is_causal.
    q, k, v = _inputs("openreg", requires_grad=True)
    mask = create_block_mask(_causal, 1, 1, L, L, device="openreg")
    flex_attention(q, k, v, block_mask=mask).square().sum().backward()
    qc, kc, vc = _inputs("cpu", requires_grad=True)
    F.scaled_dot_product_attention(qc, kc, vc, is_causal=True).square().sum().backward()
    torch.testing.assert_close([t.grad.cpu() for t in (q, k, v)], [qc.grad, kc.grad, vc.grad], atol=1e-5, rtol=1e-4)


def test_compiling_for_training_is_refused_at_the_call():
    reset()
    q, k, v = _inputs("openreg", requires_grad=True)
    with pytest.raises(Exception, match="inference only"):
        torch.compile(flex_attention, fullgraph=True)(q, k, v)
