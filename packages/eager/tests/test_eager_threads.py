"""Ops that several host threads launch onto one stream run in the stream's order, as on a GPU: a thread's op run at
the call (a signature's first call, a data-dependent op) holds the stream, and the blocks it is given are none that
work launched meanwhile by another thread still uses. Each iteration takes new sizes, so that every op's signature
is new and runs at the call while the other threads' ops are queued; the CPU gives the reference."""

from __future__ import annotations

import threading

import pytest
import torch
from torch import Tensor


def _chain(x: Tensor, k: int) -> Tensor:
    y = x
    for _ in range(k):
        y = torch.mm(y, x) / x.size(0)
    return y.sum(0)


def _forked(x: Tensor) -> Tensor:
    futures = [torch.jit.fork(_chain, x, k) for k in range(1, 5)]
    return torch.stack([torch.jit.wait(f) for f in futures])


def _python_threads(x: Tensor) -> Tensor:
    out: list[Tensor | None] = [None] * 4

    def work(k):
        out[k - 1] = _chain(x, k)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return torch.stack(out)


@pytest.mark.parametrize("run", [torch.jit.script(_forked), _python_threads], ids=["jit_fork", "python_threads"])
def test_ops_launched_from_several_threads_onto_one_stream_compute_what_the_cpu_does(run):
    wrong = []
    for size in range(64, 214):
        x = torch.randn(size, size, generator=torch.Generator().manual_seed(size)) / 4
        got, want = run(x.to("openreg")).cpu(), run(x)
        if not torch.allclose(got, want, rtol=1e-4, atol=1e-5):
            wrong.append(size)
    assert not wrong, f"wrong results for sizes {wrong}"
