"""Where CUDA's kernels shape an op's results otherwise than the CPU's, PyTorch's meta kernels and decompositions
describe CUDA's for every device but the CPU, and so do fake tensors and torch.compile: openreg's results are
CUDA's there, the same as its own meta kernel's. The values the two conventions share are the CPU's."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.testing import assert_close

import openreg_eager  # noqa: F401  (registers the openreg kernels)


def _on(device, args):
    return [a.to(device) if isinstance(a, torch.Tensor) else a for a in args]


def _layouts(results):
    return [(tuple(t.shape), t.stride(), t.dtype) for t in results]


def _openreg_matches_its_meta_kernel(fn, args):
    """fn's results on openreg (the openreg tensors in `args` are used as they are), after checking their shapes,
    strides and dtypes against fn on fake openreg tensors (what torch.compile traces with)."""
    results = fn(*_on("openreg", args))
    mode = FakeTensorMode()
    fakes = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in _on("openreg", args)]
    with mode:
        expected = fn(*fakes)
    assert _layouts(results) == _layouts(expected)
    return [t.cpu() for t in results]


def _assert_at_least_as_exact(openreg, cpu, exact):
    """For float16/bfloat16, whose CPU kernels round the statistics to the input's dtype: openreg's results,
    computed from float32 statistics, are as close to float64's as the CPU's, give or take one rounding of the
    largest value to the result's dtype."""
    for mine, theirs, reference in zip(openreg, cpu, exact, strict=True):
        assert mine.dtype == theirs.dtype
        rounding = torch.finfo(mine.dtype).eps * reference.abs().max()
        assert (mine.double() - reference).abs().max() <= (theirs.double() - reference).abs().max() + rounding


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_of_reduced_floats_saves_float32_statistics(dtype, affine):
    x = torch.randn(4, 3, 8).to(dtype)
    w, b = (torch.randn(8).to(dtype), torch.randn(8).to(dtype)) if affine else (None, None)
    out, mean, rstd = _openreg_matches_its_meta_kernel(
        lambda x, w, b: torch.native_layer_norm(x, [8], w, b, 1e-5), [x, w, b]
    )
    assert mean.dtype == rstd.dtype == torch.float32
    widen = lambda t: None if t is None else t.float()  # noqa: E731
    _, wide_mean, wide_rstd = torch.native_layer_norm(x.float(), [8], widen(w), widen(b), 1e-5)
    assert_close(mean, wide_mean, rtol=0, atol=0)
    assert_close(rstd, wide_rstd, rtol=0, atol=0)
    assert_close(out, torch.native_layer_norm(x, [8], w, b, 1e-5)[0])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_layer_norm_of_reduced_floats_trains_at_least_as_exactly_as_on_the_cpu(dtype):
    """The float32 statistics make openreg's gradients closer to float64's than the CPU's, whose backward
    reads statistics rounded to `dtype`."""
    grads = {}
    for device, compute in (("cpu", dtype), ("openreg", dtype), ("cpu", torch.float64)):
        norm = torch.nn.LayerNorm(16).to(device=device, dtype=compute)
        x = torch.randn(6, 16, generator=torch.Generator().manual_seed(1)).to(dtype)
        x = x.to(device, compute).requires_grad_()
        (norm(x) * torch.arange(16.0, device=device, dtype=compute)).sum().backward()
        grads[device, compute] = [t.grad.cpu() for t in (x, norm.weight, norm.bias)]
    _assert_at_least_as_exact(grads["openreg", dtype], grads["cpu", dtype], grads["cpu", torch.float64])


def _eval_batch_norms():
    legit = torch.ops.aten._native_batch_norm_legit.default
    no_update = torch.ops.aten._batch_norm_no_update.default
    return {
        "native_batch_norm": lambda x, w, b, rm, rv: torch.native_batch_norm(x, w, b, rm, rv, False, 0.1, 1e-5),
        "_native_batch_norm_legit": lambda x, w, b, rm, rv: legit(x, w, b, rm, rv, False, 0.1, 1e-5),
        # Its composite kernel refused every device but the CPU.
        "_batch_norm_no_update": lambda x, w, b, rm, rv: no_update(x, w, b, rm, rv, 0.1, 1e-5)[:3],
    }


# (input dtype, weight and running statistics dtype)
_BATCH_NORM_DTYPES = [
    (torch.float32, torch.float32),
    (torch.float64, torch.float64),
    (torch.float16, torch.float16),
    (torch.float16, torch.float32),
    (torch.bfloat16, torch.bfloat16),
]


def _batch_norm_args(dtype, param_dtype):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 2, 4, generator=g).to(dtype)
    weight, bias, mean = (torch.randn(2, generator=g).to(param_dtype) for _ in range(3))
    return [x, weight, bias, mean, (torch.rand(2, generator=g) + 0.5).to(param_dtype)]


@pytest.mark.parametrize("op", sorted(_eval_batch_norms()))
@pytest.mark.parametrize(("dtype", "param_dtype"), _BATCH_NORM_DTYPES, ids=str)
def test_batch_norm_in_eval_mode_saves_the_running_statistics(op, dtype, param_dtype):
    args = _batch_norm_args(dtype, param_dtype)
    out, save_mean, save_invstd = _openreg_matches_its_meta_kernel(_eval_batch_norms()[op], args)
    stats_dtype = torch.float64 if dtype == torch.float64 else torch.float32
    running_mean, running_var = args[3], args[4]
    assert_close(out, _eval_batch_norms()["native_batch_norm"](*args)[0])
    assert_close(save_mean, running_mean.to(stats_dtype), rtol=0, atol=0)
    assert_close(save_invstd, (running_var.double() + 1e-5).rsqrt().to(stats_dtype))


_EVAL_BATCH_NORM_OUTS = {
    "native_batch_norm.out": torch.ops.aten.native_batch_norm.out,
    "_native_batch_norm_legit.out": torch.ops.aten._native_batch_norm_legit.out,
}


@pytest.mark.parametrize("op", sorted(_EVAL_BATCH_NORM_OUTS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("given", [0, 2], ids=["empty statistics", "statistics of their size"])
def test_batch_norm_in_eval_mode_writes_the_running_statistics_into_its_out_tensors(op, dtype, given):
    """As CUDA's out= kernel does, and as the functional form returns them (PyTorch's test_ops.py::test_out); the
    CPU's leaves them as given."""
    args = [t.to("openreg") for t in _batch_norm_args(dtype, dtype)]
    outs = [torch.empty(0, dtype=dtype, device="openreg")]
    outs += [torch.full((given,), float("nan"), dtype=dtype, device="openreg") for _ in range(2)]
    _EVAL_BATCH_NORM_OUTS[op](*args, False, 0.1, 1e-5, out=outs[0], save_mean=outs[1], save_invstd=outs[2])
    for written, expected in zip(outs, _eval_batch_norms()["native_batch_norm"](*args), strict=True):
        assert_close(written.cpu(), expected.cpu(), rtol=0, atol=0)


def _training_batch_norms():
    legit = torch.ops.aten._native_batch_norm_legit
    with_update = torch.ops.aten._batch_norm_with_update.default
    return {
        "native_batch_norm": lambda x, w, b, rm, rv: torch.native_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5),
        "_native_batch_norm_legit": lambda x, w, b, rm, rv: legit.default(x, w, b, rm, rv, True, 0.1, 1e-5),
        "_native_batch_norm_legit.no_stats": lambda x, w, b, rm, rv: legit.no_stats(x, w, b, True, 0.1, 1e-5),
        "_batch_norm_with_update": lambda x, w, b, rm, rv: with_update(x, w, b, rm, rv, 0.1, 1e-5)[:3],
    }


@pytest.mark.parametrize("op", sorted(_training_batch_norms()))
@pytest.mark.parametrize(("dtype", "param_dtype"), _BATCH_NORM_DTYPES, ids=str)
def test_batch_norm_in_training_saves_statistics_in_the_accumulating_type(op, dtype, param_dtype):
    fn = _training_batch_norms()[op]
    args = _batch_norm_args(dtype, param_dtype)
    on_openreg = _on("openreg", args)
    out, save_mean, save_invstd = _openreg_matches_its_meta_kernel(fn, on_openreg)
    cpu_args = [t.clone() for t in args]
    exact = fn(*[t.double() for t in args])[0]
    _assert_at_least_as_exact([out], [fn(*cpu_args)[0]], [exact])
    assert save_mean.dtype == save_invstd.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
    _, wide_mean, wide_invstd = torch.native_batch_norm(*[t.double() for t in args], True, 0.1, 1e-5)
    assert_close(save_mean.double(), wide_mean, atol=1e-6, rtol=1e-6)
    assert_close(save_invstd.double(), wide_invstd, atol=1e-5, rtol=1e-5)
    for updated_on_openreg, updated_on_cpu in zip(on_openreg[3:], cpu_args[3:], strict=True):  # running statistics
        assert updated_on_openreg.dtype == param_dtype
        assert_close(updated_on_openreg.cpu(), updated_on_cpu)


@pytest.mark.parametrize(("dtype", "param_dtype"), _BATCH_NORM_DTYPES, ids=str)
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_trains_at_least_as_exactly_as_on_the_cpu(dtype, param_dtype, training):
    grads = {}
    for device, compute, param_compute in (
        ("cpu", dtype, param_dtype),
        ("openreg", dtype, param_dtype),
        ("cpu", torch.float64, torch.float64),
    ):
        norm = torch.nn.BatchNorm2d(3).to(device=device, dtype=param_compute).train(training)
        with torch.no_grad():
            norm.running_mean.copy_(torch.tensor([0.5, -1.0, 2.0]))
            norm.running_var.copy_(torch.tensor([1.5, 0.25, 4.0]))
        x = torch.randn(2, 3, 4, 4, generator=torch.Generator().manual_seed(0)).to(dtype)
        x = x.to(device, compute).requires_grad_()
        (norm(x).double() + 1).pow(3).sum().backward()
        grads[device, compute] = [t.grad.cpu() for t in (x, norm.weight, norm.bias)] + [norm.running_mean.cpu()]
    openreg, cpu = grads["openreg", dtype], grads["cpu", dtype]
    if dtype in (torch.float16, torch.bfloat16):
        _assert_at_least_as_exact(openreg, cpu, grads["cpu", torch.float64])
    else:
        assert_close(openreg, cpu)


_INDICES = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9])
_OFFSETS = torch.tensor([0, 3, 3, 5, 8])  # an empty bag, and a last offset include_last_offset reads as the end


@pytest.mark.parametrize("op", ["_embedding_bag", "_embedding_bag_forward_only"])
@pytest.mark.parametrize("mode", [0, 1, 2], ids=["sum", "mean", "max"])
@pytest.mark.parametrize("include_last_offset", [False, True])
def test_embedding_bag_sizes_its_extra_results_as_cuda(op, mode, include_last_offset):
    fn = getattr(torch.ops.aten, op).default
    call = lambda w, i, o: fn(w, i, o, False, mode, False, None, include_last_offset)  # noqa: E731
    weight = torch.randn(10, 5)
    out, offset2bag, bag_size, max_indices = _openreg_matches_its_meta_kernel(call, [weight, _INDICES, _OFFSETS])
    cpu = call(weight, _INDICES, _OFFSETS)
    assert_close(out, cpu[0])
    # The CPU fills offset2bag in mean and max mode: each index's bag.
    mean_mode = fn(weight, _INDICES, _OFFSETS, False, 1, False, None, include_last_offset)
    assert offset2bag.tolist() == mean_mode[1].tolist() == [0, 0, 0, 2, 2, 3, 3, 3]
    n_bags = len(cpu[0])
    assert bag_size[:n_bags].tolist() == cpu[2][:n_bags].tolist()
    if mode == 2:
        assert max_indices.tolist() == cpu[3].tolist()


@pytest.mark.parametrize(
    ("mode", "per_sample_weights", "sparse"),
    # per-sample weights are for mode "sum" only, sparse gradients not for "max"
    [("sum", False, False), ("sum", True, False), ("sum", True, True), ("mean", False, True), ("max", False, False)],
)
# The backward reads offset2bag in the type indices and offsets promote to.
@pytest.mark.parametrize("index_dtypes", [(torch.int64, torch.int64), (torch.int64, torch.int32),
                                          (torch.int32, torch.int64), (torch.int32, torch.int32)], ids=str)
def test_embedding_bag_trains_as_on_the_cpu(mode, per_sample_weights, sparse, index_dtypes):
    indices, offsets = (t.to(dtype) for t, dtype in zip((_INDICES, _OFFSETS), index_dtypes, strict=True))
    grads = {}
    for device in ("cpu", "openreg"):
        bag = torch.nn.EmbeddingBag(10, 4, mode=mode, sparse=sparse).to(device)
        with torch.no_grad():
            bag.weight.copy_(torch.arange(40.0).reshape(10, 4).sin())
        psw = torch.linspace(0.5, 2.0, 8, device=device, requires_grad=True) if per_sample_weights else None
        bag(indices.to(device), offsets.to(device), per_sample_weights=psw).pow(2).sum().backward()
        grads[device] = [bag.weight.grad.cpu().to_dense()] + ([psw.grad.cpu()] if psw is not None else [])
    for cpu, openreg in zip(grads["cpu"], grads["openreg"], strict=True):
        assert_close(openreg, cpu)


@pytest.mark.parametrize("size", [0, 3, 8])
def test_nonzero_static_lays_its_result_out_by_column(size):
    x = torch.tensor([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])
    (result,) = _openreg_matches_its_meta_kernel(lambda t: (torch.nonzero_static(t, size=size, fill_value=-7),), [x])
    assert result.tolist() == torch.nonzero_static(x, size=size, fill_value=-7).tolist()


def _pooled(dims: int, channels_last: bool):
    torch.manual_seed(0)
    x = torch.randn((2, 3) + (6, 5, 4)[:dims])
    if channels_last:
        x = x.to(memory_format=torch.channels_last if dims == 2 else torch.channels_last_3d)
    pool = torch.nn.functional.max_pool2d if dims == 2 else torch.nn.functional.max_pool3d
    return pool(x, 2, 2, return_indices=True)


@pytest.mark.parametrize("channels_last", [True, False])
@pytest.mark.parametrize("dims", [2, 3])
def test_max_unpool_writes_a_contiguous_result_whatever_the_inputs_layout(dims, channels_last):
    # CUDA's kernel makes its operands contiguous; the CPU's keeps a channels-last input's layout.
    values, indices = _pooled(dims, channels_last)
    size = (6, 5, 4)[:dims]
    unpool = torch.nn.functional.max_unpool2d if dims == 2 else torch.nn.functional.max_unpool3d
    fn = lambda v, i: (unpool(v, i, 2, 2, output_size=size),)  # noqa: E731
    (result,) = _openreg_matches_its_meta_kernel(fn, [values, indices])
    assert_close(result, unpool(values, indices, 2, 2, output_size=size), rtol=0, atol=0)
    compiled = torch.compile(fn, backend="inductor")(values.to("openreg"), indices.to("openreg"))[0]
    assert compiled.stride() == result.stride() and compiled.is_contiguous()
    assert_close(compiled.cpu(), result, rtol=0, atol=0)


@pytest.mark.parametrize("dims", [2, 3])
def test_max_unpool_refuses_a_non_contiguous_out_as_cuda_does(dims):
    values, indices = (t.to("openreg") for t in _pooled(dims, channels_last=False))
    size = (6, 5, 4)[:dims]
    op, extra = (torch.ops.aten.max_unpool2d, ()) if dims == 2 else (torch.ops.aten.max_unpool3d, ([2] * 3, [0] * 3))
    out = torch.zeros((2, 3) + size, device="openreg").transpose(-1, -2).contiguous().transpose(-1, -2)
    with pytest.raises(RuntimeError, match="^output must be contiguous$"):
        op.out(values, indices, list(size), *extra, out=out)
    assert out.cpu().eq(0).all()  # untouched
    fresh = torch.empty(0, device="openreg")
    op.out(values, indices, list(size), *extra, out=fresh)
    assert fresh.is_contiguous()
    assert_close(fresh.cpu(), op(values.cpu(), indices.cpu(), list(size), *extra), rtol=0, atol=0)


NARROW_COPY_ARGS = {"dimension out of range": (3, 0, 0), "negative length": (0, 0, -1),
                    "start past the end": (1, 6, 1), "a good call": (1, 1, 3), "from the end": (-1, -4, 2)}


@pytest.mark.parametrize("args", NARROW_COPY_ARGS.values(), ids=NARROW_COPY_ARGS.keys())
def test_narrow_copy_is_cudas_narrow_then_clone(args):
    # CUDA has no narrow_copy kernel: it runs the composite one, whose errors are narrow's (PyTorch's OpInfo
    # error_inputs expect them for every device but the CPU, whose own kernel asserts).
    x = torch.randn(4, 5, 6)

    def outcome(fn):
        try:
            return fn().cpu()
        except Exception as e:  # noqa: BLE001  (any exception: its type and message are compared)
            return type(e), str(e)

    expected = outcome(lambda: x.narrow(*args).clone())
    result = outcome(lambda: torch.narrow_copy(x.to("openreg"), *args))
    if isinstance(expected, torch.Tensor):
        assert torch.equal(result, expected)
        assert result.is_contiguous()
    else:
        assert result == expected


def test_lstsq_solves_with_gels_alone_as_cuda():
    # gels is CUDA's only driver and so its default (the CPU's is gelsy); ATen refuses any other on a device that is
    # not the CPU (PyTorch's test_linalg.py::test_linalg_lstsq_input_checks expects that for every other device).
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(2, 5, 3, generator=g, dtype=torch.float64), torch.randn(2, 5, 2, generator=g,
                                                                                  dtype=torch.float64)
    result = torch.linalg.lstsq(a.to("openreg"), b.to("openreg"))
    for r, e in zip(result, torch.linalg.lstsq(a, b, driver="gels"), strict=True):
        assert torch.equal(r.cpu(), e)
    assert result.rank.numel() == 0  # gels computes no rank; the CPU's default driver does
    assert torch.linalg.lstsq(a, b).rank.numel() == 2
    named = torch.linalg.lstsq(a.to("openreg"), b.to("openreg"), driver="GELS")
    assert torch.equal(named.solution.cpu(), result.solution.cpu())
    for driver in ("gelsy", "gelsd", "gelss", "qr"):
        with pytest.raises(RuntimeError, match=r"^torch.linalg.lstsq: `driver` other than `gels` is not supported "
                                               r"on CUDA$"):
            torch.linalg.lstsq(a.to("openreg"), b.to("openreg"), driver=driver)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_inverse_solves_against_the_identity_as_cuda(upper):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(2, 4, 4, generator=g, dtype=torch.float64)
    factor = torch.linalg.cholesky(a @ a.mT + torch.eye(4, dtype=torch.float64))
    factor = factor.mT if upper else factor
    result = torch.cholesky_inverse(factor.to("openreg"), upper=upper)
    assert torch.equal(result.cpu(), torch.cholesky_solve(torch.eye(4, dtype=torch.float64), factor, upper))
    assert result.stride() == torch.cholesky_inverse(factor, upper=upper).stride()
    assert_close(result.cpu(), torch.cholesky_inverse(factor, upper=upper))
    out = torch.empty(0, dtype=torch.float64, device="openreg")
    assert torch.cholesky_inverse(factor.to("openreg"), upper=upper, out=out) is out
    assert torch.equal(out.cpu(), result.cpu())


@pytest.mark.parametrize(("factor_shape", "out_shape"), [((3, 3), (0,)), ((2, 3, 3), (0,)), ((0, 2, 2), (0, 2, 2)),
                                                         ((3, 3), (3, 3)), ((3, 3), (2, 2))])
def test_cholesky_inverse_lays_out_its_out_as_atens_kernel(factor_shape, out_shape):
    """ATen's kernel (the CPU's and CUDA's) lays an empty `out` out batched column-major, as LAPACK writes it, and
    keeps or resizes any other as resize_output does."""
    def layout(device):
        eye = torch.eye(factor_shape[-1], dtype=torch.float64).expand(factor_shape)
        out = torch.empty(out_shape, dtype=torch.float64, device=device)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # resize_output's warning for a non-empty out of another shape
            torch.cholesky_inverse(eye.to(device), out=out)
        return out.shape, out.stride()

    assert layout("openreg") == layout("cpu")


def test_cholesky_inverse_of_a_zero_on_the_diagonal_is_inf_or_nan_as_on_cuda():
    # PyTorch's test_linalg.py::test_cholesky_inverse_errors_and_warnings asserts this for CUDA; the CPU raises
    factor = torch.randn(3, 3, generator=torch.Generator().manual_seed(1))
    factor[1, 1] = 0
    with pytest.raises(torch.linalg.LinAlgError, match="The diagonal element 2 is zero"):
        torch.cholesky_inverse(factor)
    result = torch.cholesky_inverse(factor.to("openreg")).cpu()
    assert result.isinf().any() or result.isnan().any()
