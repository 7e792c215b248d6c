"""LU without pivoting (kernels/lu_without_pivoting.cpp), which CUDA computes and the CPU refuses. The CPU's
pivoted factorization is the reference where partial pivoting exchanges no rows (a matrix whose diagonal
dominates its column): there both factorizations are the same one."""

from __future__ import annotations

import pytest
import torch

DEV = "openreg"


def dominant(*shape, dtype=torch.float64, seed=0):
    """Each diagonal entry larger than the rest of its column: partial pivoting keeps every row in place."""
    a = torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)
    k = min(shape[-2:])
    column_sums = a.abs().sum(-2)[..., :k]
    diagonal = torch.diagonal(a[..., :k, :k], dim1=-2, dim2=-1)
    diagonal.copy_(column_sums + 1)
    return a


SHAPES = {"square": (4, 4), "batch": (3, 5, 5), "tall": (6, 3), "wide": (3, 6), "empty_batch": (0, 3, 3)}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex128])
@pytest.mark.parametrize("shape", SHAPES)
def test_factor_is_the_cpus_pivoted_one_where_that_exchanges_no_rows(shape, dtype):
    a = dominant(*SHAPES[shape], dtype=dtype)
    want = torch.linalg.lu_factor_ex(a)
    got = torch.linalg.lu_factor_ex(a.to(DEV), pivot=False)
    assert got.LU.stride() == want.LU.stride()
    for g, w in zip(got, want, strict=True):
        assert (g.device.type, g.dtype, g.shape) == (DEV, w.dtype, w.shape)
        torch.testing.assert_close(g.cpu(), w)


@pytest.mark.parametrize("shape", ["square", "batch", "tall", "wide"])
def test_linalg_lu_gives_an_empty_p(shape):
    a = dominant(*SHAPES[shape])
    p, l_want, u_want = torch.linalg.lu(a)
    assert torch.equal(p, torch.eye(p.shape[-1], dtype=p.dtype).expand_as(p))
    got = torch.linalg.lu(a.to(DEV), pivot=False)
    assert got.P.shape == (0,) and got.P.device.type == DEV
    torch.testing.assert_close(got.L.cpu(), l_want)
    torch.testing.assert_close(got.U.cpu(), u_want)


def test_a_matrix_pivoting_would_reorder_is_factored_in_place():
    a = torch.tensor([[1.0, 2, 3], [4, 5, 6], [7, 8, 10]], dtype=torch.float64)
    lu, pivots, info = torch.linalg.lu_factor_ex(a.to(DEV), pivot=False)
    lower, upper = lu.tril(-1) + torch.eye(3, device=DEV, dtype=a.dtype), lu.triu()
    torch.testing.assert_close((lower @ upper).cpu(), a)
    assert pivots.cpu().tolist() == [1, 2, 3] and info.item() == 0
    for g, w in zip(torch.linalg.lu_factor_ex(a.to(DEV)), torch.linalg.lu_factor_ex(a), strict=True):
        torch.testing.assert_close(g.cpu(), w)  # with pivoting, the CPU's kernel


def test_a_zero_pivot_is_reported_and_checked_as_the_cpus_info():
    a = torch.tensor([[0.0, 1], [1, 0]])
    lu, _, info = torch.linalg.lu_factor_ex(a.to(DEV), pivot=False)
    assert info.item() == 1 and not lu.isfinite().all()
    with pytest.raises(RuntimeError) as cpu:
        torch.linalg.lu_factor(torch.zeros(2, 2))  # the CPU's info 1, from its own kernel
    with pytest.raises(RuntimeError) as dev:
        torch.linalg.lu_factor(a.to(DEV), pivot=False)
    assert str(dev.value) == str(cpu.value)


@pytest.mark.filterwarnings("ignore:torch.lu is deprecated")
def test_out_and_the_deprecated_entry_point():
    a = dominant(4, 4)
    outs = (torch.empty(0, device=DEV, dtype=a.dtype), torch.empty(0, device=DEV, dtype=torch.int32),
            torch.empty(0, device=DEV, dtype=torch.int32))
    returned = torch.linalg.lu_factor_ex(a.to(DEV), pivot=False, out=outs)
    assert all(r is o for r, o in zip(returned, outs, strict=True))
    cpu_outs = tuple(torch.empty(0, dtype=o.dtype) for o in outs)
    torch.linalg.lu_factor_ex(a, out=cpu_outs)
    assert [o.stride() for o in outs] == [o.stride() for o in cpu_outs]
    torch.testing.assert_close(outs[0].cpu(), torch.linalg.lu_factor(a).LU)
    lu, pivots = torch.lu(a.to(DEV), pivot=False)
    torch.testing.assert_close(lu.cpu(), outs[0].cpu())
    assert pivots.cpu().tolist() == [1, 2, 3, 4]


def test_gradient_is_the_cpus_where_no_rows_are_exchanged():
    a = dominant(4, 4)

    def grad(device, pivot):
        x = a.to(device).requires_grad_()
        lu = torch.linalg.lu_factor(x, pivot=pivot).LU
        (lu * torch.arange(16.0, dtype=a.dtype, device=device).reshape(4, 4)).sum().backward()
        return x.grad.cpu()

    torch.testing.assert_close(grad(DEV, False), grad("cpu", True))


@pytest.mark.parametrize("bad", ["vector", "integer"])
def test_bad_input_raises_the_cpus_error(bad):
    a = torch.ones(3) if bad == "vector" else torch.ones(3, 3, dtype=torch.int64)
    with pytest.raises(RuntimeError) as cpu:
        torch.linalg.lu_factor(a, pivot=False)
    with pytest.raises(RuntimeError) as dev:
        torch.linalg.lu_factor(a.to(DEV), pivot=False)
    if bad == "vector":  # the kernel's name differs, as CUDA's does
        assert str(dev.value) == str(cpu.value)
    assert dev.type is cpu.type
