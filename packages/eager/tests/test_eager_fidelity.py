"""openreg behaves as the CPU does: the same call on both devices raises the same exception (type and
message) at the call, gives the same warnings through Python's `warnings`, and writes the same values, dtypes
and layouts. Each case is one a device-generic test suite exercises and openreg once got wrong.
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import pytest
import torch
from torch.testing import assert_close

import openreg_eager  # noqa: F401  (registers the openreg kernels)


def _outcome(fn, device: str):
    """What `fn(device)` does on `device`: ("ok", result on the CPU, warnings) or ("raised", type, message,
    warnings). openreg's work is synchronised inside the warnings capture, so an error or a warning that
    surfaced only at a later synchronisation would show up as a difference."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = fn(device)
            layout = None
            if isinstance(result, torch.Tensor):  # its own dtype, layout and lazy bits, then its values
                layout = (result.dtype, result.stride(), result.is_conj(), result.is_neg())
                result = result.cpu()
            torch.openreg.synchronize()
            outcome = ("ok", layout, result)
        except Exception as e:  # noqa: BLE001  (the type is what is compared)
            outcome = ("raised", type(e), str(e).split("\n")[0])
    return outcome, [(w.category, str(w.message)) for w in caught]


def assert_same_outcome(fn) -> None:
    (cpu, cpu_warnings), (dev, dev_warnings) = _outcome(fn, "cpu"), _outcome(fn, "openreg")
    assert dev[0] == cpu[0], f"cpu: {cpu}; openreg: {dev}"
    if cpu[0] == "raised":
        assert dev[1:] == cpu[1:]
    else:
        assert dev[1] == cpu[1], f"dtype, strides, conj, neg: cpu {cpu[1]}, openreg {dev[1]}"
        assert_close(dev[2], cpu[2], equal_nan=True)
    assert dev_warnings == cpu_warnings
    torch.openreg.synchronize()  # nothing left behind for the next test


def _mask_assign(d):
    a = torch.zeros(4, device=d)
    a[a > -1] = torch.tensor([1.0, 2, 3], device=d)
    return a


def _index_out_of_range(d):
    return torch.zeros(3, device=d)[torch.tensor([5], device=d)]


METADATA_ERRORS = {
    "mask assign, wrong count": _mask_assign,
    "bool - bool": lambda d: torch.ones(2, dtype=torch.bool, device=d) - torch.ones(2, dtype=torch.bool, device=d),
    "integer add, float alpha": lambda d: torch.ones(2, dtype=torch.long, device=d).add(
        torch.ones(2, dtype=torch.long, device=d), alpha=0.5),
    "random_ past the dtype": lambda d: torch.empty(3, dtype=torch.int8, device=d).random_(0, 1000),
    "uniform_ from > to": lambda d: torch.empty(3, device=d).uniform_(2, 1),
    "view_as_complex, last dim 3": lambda d: torch.view_as_complex(torch.zeros(2, 3, device=d)),
    "index out of range (IndexError)": _index_out_of_range,
    "matmul shapes": lambda d: torch.ones(2, 3, device=d) @ torch.ones(2, 3, device=d),
    "cat of mismatched shapes": lambda d: torch.cat([torch.ones(2, 3, device=d), torch.ones(2, 4, device=d)]),
    # The view kept the conjugate bit on a float tensor, and every later use failed at a sync.
    "view_as_real of a conjugated tensor": lambda d: torch.view_as_real(
        torch.tensor([1 + 2j, 3 - 4j], device=d).conj()),
}


@pytest.mark.parametrize("case", METADATA_ERRORS)
def test_errors_are_raised_at_the_call_with_the_cpus_type(case):
    assert_same_outcome(METADATA_ERRORS[case])


@pytest.mark.parametrize("case", METADATA_ERRORS)
def test_errors_are_raised_at_the_call_after_a_good_call_of_the_same_op(case):
    """A signature that ran once is queued afterwards; a call that fails a check must still fail at the call."""
    fn = METADATA_ERRORS[case]
    try:
        fn("openreg")
    except Exception:  # noqa: BLE001
        pass
    assert_same_outcome(fn)


def _after_a_good_call(op, bad):
    def fn(d):
        op(torch.eye(4, device=d) * 2)  # the signature is known: a later call may be queued
        x = bad.to(d)
        for _ in range(6):  # past the short ops that run at the call after a read
            x = x + 0
        return op(x)

    return fn


# What LAPACK finds in the values: CUDA reads its status on the host at the call, and raises there.
LAPACK_STATUS = {
    "cholesky, not positive-definite": _after_a_good_call(torch.cholesky, -torch.eye(4)),
    "linalg.eigh, NaN": _after_a_good_call(lambda a: torch.linalg.eigh(a)[0], torch.full((4, 4), float("nan"))),
    "linalg.svdvals, NaN": _after_a_good_call(torch.linalg.svdvals, torch.full((4, 4), float("nan"))),
    "linalg.pinv, NaN": _after_a_good_call(torch.linalg.pinv, torch.full((4, 4), float("nan"))),
    "linalg.cholesky, not positive-definite": _after_a_good_call(torch.linalg.cholesky, -torch.eye(4)),
    "linalg.inv, singular": _after_a_good_call(torch.linalg.inv, torch.zeros(4, 4)),
}


@pytest.mark.parametrize("case", LAPACK_STATUS)
def test_what_lapack_finds_in_the_values_raises_at_the_call(case):
    always = torch.is_warn_always_enabled()
    torch.set_warn_always(True)  # torch.cholesky's deprecation warns once per process, for both devices together
    try:
        assert_same_outcome(LAPACK_STATUS[case])
    finally:
        torch.set_warn_always(always)


def test_a_data_dependent_error_keeps_its_type_when_raised_at_a_later_sync():
    """An index checked by the kernel (as by CUDA's device-side assert) may fail later, but as an IndexError that
    names the op, once, leaving the device usable."""
    x = torch.zeros(3, device="openreg")
    x[torch.tensor([1], device="openreg")]  # the signature runs once, then is queued
    torch.openreg.synchronize()
    index = torch.tensor([7], device="openreg")
    torch.openreg._sleep(50_000_000)  # a busy stream: the short op is queued, not run at the call
    x[index]
    with pytest.raises(IndexError, match="aten::index.*out of bounds"):
        torch.openreg.synchronize()
    torch.openreg.synchronize()  # raised once
    assert (x + 1).sum().item() == 3.0


def _ldexp_half(d):
    return torch.tensor([-2, 2**-10], dtype=torch.half, device=d), torch.tensor([-25, 20], device=d)


def _mish_grad(d):
    x = torch.linspace(-4, 4, 64).to(torch.bfloat16).to(d).requires_grad_()
    torch.nn.functional.mish(x).backward(torch.ones_like(x))
    return x.grad.float()  # compared to float32's tolerance: bfloat16's would hide a rounding step


# Values past the range or precision a naive composite kernel keeps, or that it cannot compute at all: the CPU
# kernel's exact ones, as CUDA's.
VALUES = {
    "mish backward bfloat16": _mish_grad,
    "ldexp float16": lambda d: torch.ldexp(*_ldexp_half(d)),
    "ldexp float16 out=": lambda d: torch.ldexp(*_ldexp_half(d), out=torch.empty(2, dtype=torch.half, device=d)),
    "ldexp_ float16": lambda d: _ldexp_half(d)[0].ldexp_(_ldexp_half(d)[1]),
    "ldexp bfloat16": lambda d: torch.ldexp(torch.tensor([3.0], dtype=torch.bfloat16, device=d),
                                            torch.tensor([-130], device=d)),
    # Their composite kernels called the CPU's DispatchStub, which has no openreg kernel (an internal assert).
    "conj_physical_ complex64": lambda d: torch.tensor([1 + 2j, -3j, 4.0], device=d).conj_physical_(),
    "kaiser_window": lambda d: torch.kaiser_window(7, periodic=False, beta=8.0, device=d),
    "kaiser_window float16 periodic": lambda d: torch.kaiser_window(5, device=d, dtype=torch.float16),
    "kaiser_window out=": lambda d: torch.kaiser_window(6, True, 3.0, out=torch.empty(6, dtype=torch.float64,
                                                                                   device=d)),
    # Views of tensors with their math bits set, which a view op's meta kernel sees too.
    "imag of a conjugated tensor": lambda d: torch.tensor([1 + 2j, 3 - 4j], device=d).conj().imag,
    "view_as_real of a resolved conjugate": lambda d: torch.view_as_real(
        torch.tensor([1 + 2j, 3 - 4j], device=d).conj().resolve_conj()),
    "view of a negated tensor": lambda d: torch.tensor([1 + 2j, 3 - 4j], device=d).conj().imag.view(2, 1),
}


@pytest.mark.parametrize("case", VALUES)
def test_values_are_the_cpus(case):
    assert_same_outcome(VALUES[case])


def _transposed_grad(d):
    return torch.arange(6.0, device=d).view(2, 3).t()


def _vjp_with_transposed_grad(op):
    def fn(d):
        x = torch.linspace(-1, 1, 6, device=d).view(3, 2).requires_grad_()
        return torch.autograd.grad(op(x, -1), x, _transposed_grad(d))[0]

    return fn


# Python meta kernels that lay a result out otherwise than the CPU kernel, whose out= form writes it as if
# contiguous: the values, and the layout, are the CPU's functional kernel's.
META_LAYOUTS = {
    "_log_softmax_backward_data": lambda d: torch.ops.aten._log_softmax_backward_data(
        _transposed_grad(d), torch.linspace(-2, 0, 6, device=d).view(3, 2), -1, torch.float32),
    "log_softmax vjp": _vjp_with_transposed_grad(torch.log_softmax),
    "softmax vjp": _vjp_with_transposed_grad(torch.softmax),
}


@pytest.mark.parametrize("case", META_LAYOUTS)
def test_results_take_the_cpu_kernels_layout_where_the_meta_kernel_says_otherwise(case):
    assert_same_outcome(META_LAYOUTS[case])
    assert_same_outcome(META_LAYOUTS[case])  # once more: the signature is known now


def _scatter_into_a_view(scatter):
    def fn(d):
        x = torch.arange(200.0, device=d).as_strided((10, 10), (20, 2), 1)
        return scatter(x, torch.ones(10, device=d))

    return fn


# Composite kernels that copy their input with its strides and offset (clone_preserve_strides), on every device:
# the result keeps the gaps between its elements, as fake tensors (what torch.compile traces) say.
PRESERVED_STRIDES = {
    "diagonal_scatter": _scatter_into_a_view(torch.diagonal_scatter),
    "select_scatter": _scatter_into_a_view(lambda x, src: torch.select_scatter(x, src, 0, 3)),
    "slice_scatter": _scatter_into_a_view(lambda x, src: torch.slice_scatter(x, src.view(10, 1), 1, 4, 5)),
}


@pytest.mark.parametrize("case", PRESERVED_STRIDES)
def test_results_keep_the_gaps_and_offset_the_cpu_kernel_leaves(case):
    for _ in range(2):  # at the call, then with the signature known
        assert_same_outcome(PRESERVED_STRIDES[case])
        cpu, dev = PRESERVED_STRIDES[case]("cpu"), PRESERVED_STRIDES[case]("openreg")
        assert (dev.stride(), dev.storage_offset()) == (cpu.stride(), cpu.storage_offset()) == ((20, 2), 1)


def _overlap(write):
    def fn(d):
        x = torch.arange(5.0, device=d)
        write(x)
        return x

    return fn


def _empty_out(call):
    return lambda d: call(torch.zeros(0, device=d), torch.ones(2, device=d))


def _cat_of_many_into(out_at, piece_at):
    # Dozens of list elements, the views of one tensor far apart among them.
    def fn(d):
        x = torch.arange(60.0, device=d)
        others = [torch.ones(1, device=d) for _ in range(25)]
        torch.cat(others[:12] + [x[piece_at : piece_at + 10]] + others[12:], out=x[out_at : out_at + 35])
        return x

    return fn


OVERLAPS = {
    "setitem": _overlap(lambda x: x.__setitem__(slice(1, None), x[:-1])),
    "copy_": _overlap(lambda x: x[1:].copy_(x[:-1])),
    "add_": _overlap(lambda x: x[1:].add_(x[:-1])),
    "mul out=": _overlap(lambda x: torch.mul(x[:-1], 2, out=x[1:])),
    "in-place on an expanded tensor": lambda d: torch.zeros(1, device=d).expand(3).add_(1),
    "copy_ into an expanded tensor": lambda d: torch.zeros(1, device=d).expand(3).copy_(torch.ones(3, device=d)),
    # ATen tells these by identity alone: an empty tensor has no memory to overlap.
    "an empty input as the out": _empty_out(lambda e, x: torch.cat([e, x], out=e)),
    "an empty input as the out, later in the list": _empty_out(lambda e, x: torch.cat([x, e], out=e)),
    "an out that overlaps one of many inputs": _cat_of_many_into(out_at=5, piece_at=0),
    "an out beside one of many inputs is fine": _cat_of_many_into(out_at=20, piece_at=0),
    "full overlap is fine": _overlap(lambda x: x.add_(x)),
    "disjoint halves are fine": _overlap(lambda x: x[:2].copy_(x[3:])),
}


@pytest.mark.parametrize("case", OVERLAPS)
def test_overlapping_input_and_output_raise_as_on_the_cpu(case):
    assert_same_outcome(OVERLAPS[case])


def _out_into_narrow(factory):
    def fn(d):
        x = torch.zeros(2, 3, device=d)
        factory(x.narrow(1, 1, 2))
        return x

    return fn


OUT_INTO_VIEWS = {
    "arange": _out_into_narrow(lambda out: torch.arange(0, 4, out=out)),
    "linspace": _out_into_narrow(lambda out: torch.linspace(0, 1, 4, out=out)),
    "logspace": _out_into_narrow(lambda out: torch.logspace(0, 1, 4, out=out)),
    # Out kernels that resize their out themselves: the same sizes keep its strides, as on the CPU.
    "ones": _out_into_narrow(lambda out: torch.ones(2, 2, out=out)),
    "full": _out_into_narrow(lambda out: torch.full((2, 2), 7.0, out=out)),
    "softmax": _out_into_narrow(lambda out: torch.softmax(torch.arange(4.0, device=out.device).view(2, 2), 1, out=out)),
    "add into a transposed out": lambda d: torch.add(torch.ones(2, 3, device=d), 1,
                                                     out=torch.zeros(3, 2, device=d).t()),
    "resizing a non-empty out warns": lambda d: torch.add(torch.ones(3, device=d), 1, out=torch.zeros(2, device=d)),
    # Two outs without memory are two tensors, not one (linalg_qr asserted Q was R).
    "two empty outs": lambda d: torch.linalg.qr(torch.ones(5, 0, device=d),
                                                out=(torch.empty(0, device=d), torch.empty(0, device=d)))[0],
}


@pytest.mark.parametrize("case", OUT_INTO_VIEWS)
def test_out_writes_where_the_cpu_writes(case):
    assert_same_outcome(OUT_INTO_VIEWS[case])
    assert_same_outcome(OUT_INTO_VIEWS[case])  # once more: the signature is known now


def test_out_keeps_the_layout_the_cpu_keeps():
    for d in ("cpu", "openreg"):
        out = torch.zeros(3, 2, device=d).t()
        torch.add(torch.ones(2, 3, device=d), 1, out=out)
        assert out.stride() == (1, 2)


def test_kernel_warnings_reach_pythons_warnings_once_per_call_as_on_the_cpu():
    def fn(d):
        x = torch.arange(4.0, device=d)
        return x[torch.tensor([1, 0, 1, 0], dtype=torch.uint8, device=d)]

    for _ in range(3):
        assert_same_outcome(fn)


def test_once_only_kernel_warnings_warn_at_every_call_while_torch_warns_always():
    # ATen's warn-once sites belong to the CPU kernels that both devices run (see README, "Differences from CUDA"):
    # only torch's switch makes each device's calls warn.
    def fn(d):
        sorted_ = torch.arange(6.0, device=d).view(3, 2).t()  # non-contiguous: searchsorted warns once per process
        return torch.searchsorted(sorted_, torch.ones(2, 1, device=d))

    previous = torch.is_warn_always_enabled()
    torch.set_warn_always(True)
    try:
        for _ in range(2):
            assert any("non-contiguous" in message for _, message in _outcome(fn, "cpu")[1])
            assert_same_outcome(fn)
    finally:
        torch.set_warn_always(previous)


def _isin_of_a_number(d):
    # its out= kernel, which writes the functional call's result, first resizes it to [0] (PyTorch's
    # test_sort_and_select.py::test_isin_different_devices found ATen's warning about that on openreg)
    b = torch.tensor([[10, 20, 30], [0, 1, 3]], device=d)
    return torch.stack([torch.isin(5, b), torch.isin(3, b, invert=True)])


def _mse_backward(d):
    a = torch.linspace(-1, 1, 3, device=d).requires_grad_()
    torch.nn.functional.mse_loss(a, torch.zeros(3, device=d)).backward()
    return a.grad


@pytest.mark.parametrize("fn", [_mse_backward, _isin_of_a_number], ids=["mse_loss backward", "isin of a number"])
def test_no_warning_of_openregs_own(fn):
    for _ in range(2):
        assert_same_outcome(fn)


def test_warnings_can_be_errors():
    x = torch.ones(3, device="openreg")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="resized"):
            torch.add(x, 1, out=torch.zeros(2, device="openreg"))


@pytest.mark.parametrize("state", ["default dtype", "deterministic"])
def test_global_state_is_part_of_the_cached_signature(state):
    def result(d):
        u = torch.ones(2, dtype=torch.uint8, device=d)
        return u + 5.5

    assert result("openreg").dtype == torch.float32
    if state == "default dtype":
        previous = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        try:
            assert result("openreg").dtype == result("cpu").dtype == torch.float64
        finally:
            torch.set_default_dtype(previous)
    else:
        def fn(d):
            x = torch.zeros(4, device=d)
            return x.index_add_(0, torch.tensor([0, 0], device=d), torch.ones(2, device=d))

        fn("openreg")
        previous = torch.are_deterministic_algorithms_enabled()
        torch.use_deterministic_algorithms(True, warn_only=True)
        try:
            assert_same_outcome(fn)
        finally:
            torch.use_deterministic_algorithms(previous)


def test_new_empty_strided_with_overlapping_strides():
    assert_same_outcome(lambda d: torch.zeros(1, device=d).new_empty_strided((2, 3, 4), (0, 0, 0)).fill_(1))


def _complex_system(seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(3, 3, dtype=torch.complex64, generator=g) + 3 * torch.eye(3)
    return a, torch.randn(2, 3, dtype=torch.complex64, generator=g)


@pytest.mark.parametrize("solver", ["solve", "lu_solve"])
@pytest.mark.parametrize("dtype", [torch.complex64, torch.float32])
def test_metadata_a_kernel_sets_on_its_output_reaches_the_caller(solver, dtype):
    """ATen's left=False solvers transpose their out tensor and set its conjugate bit."""
    a, b = (t if dtype.is_complex else t.real.to(dtype) for t in _complex_system())

    def fn(d):
        if solver == "solve":
            return torch.linalg.solve(a.to(d), b.to(d), left=False)
        lu, piv = torch.linalg.lu_factor(a.to(d))
        return torch.linalg.lu_solve(lu, piv, b.to(d), left=False)

    for _ in range(2):
        assert_same_outcome(fn)


def test_mode_with_out_takes_the_cpus_path():
    def fn(d):
        x = torch.tensor([[1.0, 2, 2], [3, 3, 1]], device=d)
        values, indices = torch.empty(0, device=d), torch.empty(0, dtype=torch.long, device=d)
        torch.mode(x, 1, out=(values, indices))
        return torch.stack([values, indices.float()])

    assert_same_outcome(fn)


def _run(code: str, env: dict[str, str] | None = None, tmp_path=None) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter (from a file in `tmp_path`, for TorchScript, which reads the source)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OPENREG_")}
    args = ["-c", textwrap.dedent(code)]
    if tmp_path is not None:
        (tmp_path / "script.py").write_text(textwrap.dedent(code))
        args = [str(tmp_path / "script.py")]
    return subprocess.run([sys.executable, *args], env={**clean, **(env or {})},
                          capture_output=True, text=True, timeout=120)


def test_an_op_a_kernel_calls_runs_in_place_instead_of_waiting_for_its_own_stream(tmp_path):
    """TorchScript's masked assignment calls nonzero, which synchronises, from inside the kernel."""
    proc = _run("""
        import torch
        @torch.jit.script
        def clamp_low(x):
            x[x < 50] = 1.0
            return x
        for d in ("cpu", "openreg"):
            print(clamp_low(torch.arange(100.0, device=d)).sum().item())
    """, tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr
    cpu, dev = proc.stdout.split()
    assert cpu == dev


def _traced(fn, *example):
    return torch.jit.trace(fn, example, check_trace=False)(*example)


def _cube(d):
    return torch.arange(125.0, device=d).view(5, 5, 5)


# Index lists TorchScript builds itself (its Tensor?[] is not the canonical type object): openreg once ran the CPU
# kernel with the indices still on the device, which it refused.
TORCHSCRIPT_INDEXING = {
    "traced x[i]": lambda d: _traced(lambda t, i: t[i], _cube(d), torch.tensor([1, 2], device=d)),
    "traced x[[1, 2]]": lambda d: _traced(lambda t: t[[1, 2]], _cube(d)),
    "traced x[i, :, j] = v": lambda d: _traced(
        lambda t, i, j: t.index_put_((i, None, j), torch.tensor(-1.0, device=d)),
        _cube(d), torch.tensor([0, 4], device=d), torch.tensor([3, 1], device=d)),
}


@pytest.mark.parametrize("case", TORCHSCRIPT_INDEXING)
def test_torchscript_indexing_runs_as_on_the_cpu(case):
    assert_same_outcome(TORCHSCRIPT_INDEXING[case])


def test_launch_blocking_raises_data_dependent_errors_at_the_call_with_their_type():
    """A queued op (too long to run at the call) raises its kernel's error at the call, naming the op; a short op
    on an idle stream runs at the call anyway, and raises the CPU's own error."""
    proc = _run("""
        import torch
        for n in (1 << 16, 3):
            x = torch.zeros(n, device="openreg")
            x[torch.tensor([1], device="openreg")]
            try:
                x[torch.tensor([n + 7], device="openreg")]
            except IndexError as e:
                try:
                    torch.zeros(n)[torch.tensor([n + 7])]
                except IndexError as cpu:
                    print("IndexError at the call:", "aten::index" in str(e), str(cpu) in str(e))
            torch.openreg.synchronize()
    """, env={"OPENREG_LAUNCH_BLOCKING": "1"})
    assert proc.stdout.split("\n")[:2] == ["IndexError at the call: True True",
                                           "IndexError at the call: False True"], proc.stderr


def test_copies_to_inference_tensors_in_inference_mode():
    d = torch.arange(3.0, device="openreg")
    with torch.inference_mode():
        host = d.cpu()
        text = repr(d)
    assert host.tolist() == [0.0, 1.0, 2.0]
    assert "0., 1., 2." in text


def test_a_failed_kernels_result_cannot_be_read_as_valid_from_any_thread():
    """As CUDA's sticky error, per allocation: whoever synchronises first gets the failure; reading the failed
    result, or anything computed from it, raises it again, in any thread; other data and new work stay fine."""
    x = torch.arange(3.0, device="openreg")
    x[torch.tensor([0, 1], device="openreg")] * 2  # both signatures ran once at the call: the next calls queue
    torch.openreg.synchronize()
    index = torch.tensor([0, 7], device="openreg")
    torch.openreg._sleep(50_000_000)  # a busy stream: the short ops are queued, not run at the call
    y = x[index]  # fails in the kernel
    z = y * 2
    raised = []

    def synchronize():
        try:
            torch.openreg.synchronize()
        except IndexError as e:
            raised.append(e)

    thread = threading.Thread(target=synchronize)
    thread.start()
    thread.join()
    assert len(raised) == 1
    for result in (y, z):
        with pytest.raises(IndexError, match="'aten::index' failed, so its result is not valid: index 7 is out"):
            result.cpu()
    assert x.cpu().tolist() == [0.0, 1.0, 2.0]
    y.copy_(torch.ones(2, device="openreg"))  # overwritten by a copy that succeeded: valid again
    assert y.cpu().tolist() == [1.0, 1.0]


def test_a_failure_marks_only_the_tensor_it_was_launched_for():
    """The host may free a queued kernel's output before the kernel runs, and a new tensor take that memory: the
    kernel's failure must not leave the new tensor unreadable. Empty results have no memory to mark."""
    x = torch.arange(3.0, device="openreg")
    x[torch.tensor([0, 1], device="openreg")] * 2  # both signatures ran once at the call: the next calls queue
    torch.openreg.synchronize()
    bad = torch.tensor([7, 0], device="openreg")  # fails before it writes anything
    torch.openreg.empty_cache()  # so that the next tensor of y's size takes y's memory
    torch.openreg._sleep(200_000_000)  # the failing kernel runs only after the host moved on
    y = x[bad]
    before = y.data_ptr()
    del y
    z = torch.empty(2, device="openreg")
    assert z.data_ptr() == before  # the freed output's memory, taken by a new tensor
    with torch.openreg.stream(torch.openreg.Stream()):  # written while the failing kernel still waits
        z.fill_(5.0)
        torch.openreg.current_stream().synchronize()
    empty = x[torch.tensor([], dtype=torch.long, device="openreg")]
    with pytest.raises(IndexError, match="index 7 is out of bounds"):
        torch.openreg.synchronize()
    assert z.cpu().tolist() == [5.0, 5.0]
    assert (z * 2).cpu().tolist() == [10.0, 10.0]
    assert empty.cpu().tolist() == []


def _nonzero_into(shape):
    def fn(d):
        out = torch.empty(shape, dtype=torch.long, device=d)
        torch.nonzero(torch.tensor([0.0, 1.0, 0.0, 2.0], device=d), out=out)
        return out

    return fn


@pytest.mark.parametrize("shape", [(), (0,), (2, 1), (5,), (3, 4)], ids=str)
def test_a_data_dependent_out_is_resized_as_on_the_cpu(shape):
    """nonzero(out=) resizes its out tensor to the result's shape, whatever its storage held, growing the storage
    when it is too small (the CPU's nonzero then lays its result out with strides (1, n))."""
    assert_same_outcome(_nonzero_into(shape))


def test_growing_an_out_tensor_grows_the_storage_its_views_share():
    """The CPU grows the storage itself, keeping its bytes: every tensor on it sees the grown memory."""
    def fn(d):
        base = torch.tensor([7, 8], device=d)
        torch.nonzero(torch.tensor([1.0, 1.0, 1.0, 0.0, 1.0], device=d), out=base[:0])
        return base

    assert_same_outcome(fn)


OUT_RESIZED_BEFORE_A_VALUE_ERROR = {
    "index_select": lambda d, out: torch.index_select(
        torch.ones(5, 3, device=d), 0, torch.tensor([0, 7], device=d), out=out),
    "gather": lambda d, out: torch.gather(torch.ones(2, 3, device=d), 1, torch.tensor([[0, 4]], device=d), out=out),
    "cholesky": lambda d, out: torch.linalg.cholesky(-torch.eye(3, device=d), out=out),
}


@pytest.mark.parametrize("op", list(OUT_RESIZED_BEFORE_A_VALUE_ERROR))
@pytest.mark.parametrize("repeat", [1, 2], ids=["first call", "second call"])
def test_an_out_tensor_is_resized_before_a_value_error_as_on_the_cpu(op, repeat):
    """The CPU's kernel (and CUDA's launch) resizes the out= tensor before it finds the value it refuses: the caller
    who catches the error sees the new shape, on a signature's first call (run at the call) and later (queued)."""
    def fn(d):
        for _ in range(repeat):
            out = torch.empty(0, device=d)
            with pytest.raises((IndexError, RuntimeError)):
                OUT_RESIZED_BEFORE_A_VALUE_ERROR[op](d, out)
                torch.openreg.synchronize()
        return torch.tensor(out.shape)

    assert_same_outcome(fn)


def _unbatched_dilated_convolution_gradients(nd):
    def fn(d):
        g = torch.Generator().manual_seed(0)
        x, w, b = (torch.randn(*shape, dtype=torch.double, generator=g).to(d).requires_grad_()
                   for shape in [(2, *(5,) * nd), (3, 2, *(3,) * nd), (3,)])
        conv = torch.ops.aten.slow_conv_dilated2d if nd == 2 else torch.ops.aten.slow_conv_dilated3d
        conv(x, w, [3] * nd, b, [1] * nd, [0] * nd, [2] * nd).sum().backward()
        return torch.cat([x.grad.flatten(), w.grad.flatten(), b.grad])

    return fn


@pytest.mark.parametrize("nd", [2, 3])
def test_an_unbatched_dilated_convolution_has_the_cpus_gradients(nd):
    """The slow dilated convolutions take an input without a batch dimension, and from torch 2.14 so does their
    backward (convolution_backward) on the CPU and CUDA; openreg's went to convolution_backward_overrideable, which
    refused it (PyTorch's test_convolution.py::test_slow_conv_dilated2d_unbatched). On torch 2.13 both refuse it."""
    assert_same_outcome(_unbatched_dilated_convolution_gradients(nd))


REFUSED_EXPANDED_OUTS = {
    "linspace": lambda out: torch.linspace(1, 10, 10, out=out),
    "logspace": lambda out: torch.logspace(1, 10, 10, out=out),
    "add": lambda out: torch.add(torch.ones(10, device=out.device), 1, out=out),
    "index_select": lambda out: torch.index_select(torch.ones(10, device=out.device), 0,
                                                   torch.arange(10, device=out.device), out=out),
    "cumsum": lambda out: torch.cumsum(torch.ones(10, device=out.device), 0, out=out),
    "cat": lambda out: torch.cat([torch.ones(5, device=out.device)] * 2, out=out),
    "mul_ into it": lambda out: out.mul_(2),
}


@pytest.mark.parametrize("size", [10, 5, 20], ids=["the result's size", "smaller", "larger"])
@pytest.mark.parametrize("op", list(REFUSED_EXPANDED_OUTS))
def test_an_expanded_out_is_refused_or_resized_as_on_the_cpu(op, size):
    """An expanded out= tensor (its elements share memory) is refused, and left with its strides and storage, or
    first resized, and then written, as the CPU's kernel does; openreg laid it out afresh before the kernel ran, so
    a refusal left it resized and the next such call was not refused."""
    def fn(d):
        out = torch.full((1,), 3.0, device=d).expand(size)
        refused = []
        for _ in range(2):  # the second call's signature is known
            try:
                REFUSED_EXPANDED_OUTS[op](out)
                torch.openreg.synchronize()
                refused.append(False)
            except RuntimeError as e:
                assert "more than one element of the written-to tensor" in str(e)
                refused.append(True)
        return torch.tensor([*refused, out.numel(), *out.stride(), out.untyped_storage().nbytes(), out[-1].item()])

    assert_same_outcome(fn)


def _sgn_gradients_compared(d):
    x = torch.tensor([-1.5, 0.0, 2.0], dtype=torch.float64, device=d, requires_grad=True)
    torch.sgn(x).sum().abs().backward()  # sgn's gradient for a real input is an efficient zero tensor
    return torch.isclose(x.grad, torch.zeros_like(x), rtol=1e-7, atol=1e-7)


def _zeros(d):
    return torch._efficientzerotensor((3,), dtype=torch.float64, device=d)


ZERO_TENSOR_ARGUMENTS = {
    "mul.Scalar": lambda d: torch.ops.aten.mul.Scalar(_zeros(d), 2.0),
    "add.Scalar": lambda d: torch.ops.aten.add.Scalar(_zeros(d), 2.0),
    "dot": lambda d: torch.dot(_zeros(d), torch.ones(3, dtype=torch.float64, device=d)),
    "vdot": lambda d: torch.vdot(torch.ones(3, dtype=torch.float64, device=d), _zeros(d)),
    "isclose": lambda d: torch.isclose(torch.ones(3, dtype=torch.float64, device=d), _zeros(d)),
    "sgn backward, compared": _sgn_gradients_compared,
}


@pytest.mark.parametrize("case", list(ZERO_TENSOR_ARGUMENTS))
def test_ops_given_autograds_zero_tensors_compute_as_on_the_cpu(case):
    """torch passes autograd's efficient zero tensors (no memory) straight to a few ops' kernels (mul.Scalar, dot:
    a fallthrough at their ZeroTensor key); openreg's kernels for them read memory, and crashed the process
    (mul.Scalar) or raised (dot). A zero tensor result is compared materialised (clone)."""
    assert_same_outcome(lambda d: ZERO_TENSOR_ARGUMENTS[case](d).clone())


def test_a_range_read_from_the_values_is_checked_at_the_call():
    """histc with min == max takes its range from the input, which CUDA reads on the host: a non-finite one raises
    at the call, also once a good call of the same signature has run (and queued the next ones)."""
    torch.histc(torch.tensor([2.0, 5.0], device="openreg"))
    assert_same_outcome(lambda d: torch.histc(torch.tensor([float("-inf"), float("inf")], device=d)))
    assert_same_outcome(lambda d: torch.histc(torch.tensor([1.0, 2.0, 2.5], device=d), bins=3, min=0, max=3))


def test_a_call_that_fails_at_the_call_leaves_its_arguments_readable():
    """An error raised at the call is the caller's, as on the CPU: the out= tensor it was given stays valid."""
    def fn(d):
        v = torch.tensor([1, 2, 3], device=d)
        with pytest.raises(RuntimeError, match="output tensor's dtype is wrong"):
            torch.searchsorted(v, v, out=v, out_int32=True)
        return v

    assert_same_outcome(fn)


CPU_ARGUMENTS = {
    "out= a CPU scalar": lambda: torch.nonzero(torch.ones(2, device="openreg"), out=torch.empty([], dtype=torch.long)),
    "reduction into a CPU scalar": lambda: torch.sum(torch.ones(2, 2, device="openreg"), dim=0, out=torch.empty([])),
    "in-place on a CPU scalar": lambda: torch.tensor(1.0).add_(torch.ones([], device="openreg")),
    "index_put_ with CPU values": lambda: torch.zeros(5, device="openreg").index_put_(
        (torch.tensor([0, 1]),), torch.tensor([1.0, 2.0]), accumulate=True),
}


@pytest.mark.parametrize("case", CPU_ARGUMENTS)
def test_a_cpu_tensor_may_be_read_as_a_scalar_or_an_index_but_never_written(case):
    """CUDA's rule: a CPU scalar may be an input (of the ops named below), CPU indices may index, nothing else on
    the CPU takes part."""
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        CPU_ARGUMENTS[case]()
    x = torch.zeros(5, device="openreg")
    x.index_put_((torch.tensor([0, 1]),), torch.tensor(3.0))  # CPU indices, a CPU scalar value
    assert (x * torch.tensor(2.0)).cpu().tolist() == [6.0, 6.0, 0.0, 0.0, 0.0]



def _wrapper_refuses(argument: str, on: str = "cpu") -> str:
    return rf"^Expected all tensors to be on the same device, but got {argument} is on {on}, different from "


ITERATOR_REFUSES = r"^Expected all tensors to be on the same device, but found at least two devices, openreg:0 and cpu!"
TOO_MANY = r"^Trying to pass too many CPU scalars to non-CPU kernel!"
# A CPU scalar `s` where CUDA's op takes one (TensorIterator ops, which torchgen leaves unchecked, one CPU scalar
# each) and where its generated wrapper's device check (naming the argument) or its TensorIterator refuses it:
# (call, None or the error).
CPU_SCALAR_ARGUMENTS = {
    "mul": (lambda x, s: x * s, None),
    "where": (lambda x, s: torch.where(x > 2, x, s), None),
    "lerp": (lambda x, s: torch.lerp(x, x + 1, s), None),
    "masked_fill": (lambda x, s: x.masked_fill(x > 2, s), None),
    "add, alpha": (lambda x, s: torch.add(x, s, alpha=3), None),
    "addcmul, one": (lambda x, s: torch.addcmul(x, x, s), None),
    "addcmul, two": (lambda x, s: torch.addcmul(x, s, s), TOO_MANY),
    "lerp, two": (lambda x, s: torch.lerp(x, s, s), TOO_MANY),
    "copy_": (lambda x, s: x.clone().copy_(s), None),
    "clamp": (lambda x, s: x.clamp(max=s), _wrapper_refuses("max")),
    "clamp_": (lambda x, s: x.clone().clamp_(min=s), _wrapper_refuses("min")),
    "index_select": (lambda x, s: x.index_select(1, s.long()), _wrapper_refuses("index")),
    "take": (lambda x, s: x.take(s.long()), _wrapper_refuses("index")),
    "gather": (lambda x, s: x[0, 0].gather(0, s.long() - 2), _wrapper_refuses("index")),
    "masked_select": (lambda x, s: x.masked_select(s > 0), _wrapper_refuses("mask")),
    "addmm": (lambda x, s: torch.addmm(s, x, x.T), _wrapper_refuses("mat1", on="openreg:0")),
    "searchsorted": (lambda x, s: torch.searchsorted(x[0], s), _wrapper_refuses("self")),
    "bucketize": (lambda x, s: torch.bucketize(s, x[0]), _wrapper_refuses("boundaries", on="openreg:0")),
    "prelu": (lambda x, s: torch.nn.functional.prelu(x, s.reshape(1)), _wrapper_refuses("weight")),
    "index_fill": (lambda x, s: x.index_fill(1, s.long(), -1.0), ITERATOR_REFUSES),
    "index_fill_": (lambda x, s: x.clone().index_fill_(1, s.long(), torch.tensor(-1.0)), ITERATOR_REFUSES),
    # CUDA's composite kernel unsqueezes the tolerances before it meets the singular values (PyTorch's
    # test_linalg.py::test_pinv_errors_and_warnings expects the error)
    "pinv, atol": (lambda x, s: torch.linalg.pinv(x, atol=s), ITERATOR_REFUSES),
    "pinv, rtol": (lambda x, s: torch.linalg.pinv(x, rtol=s), ITERATOR_REFUSES),
    "pinv, rcond": (lambda x, s: torch.linalg.pinv(x, rcond=s), ITERATOR_REFUSES),
    # The first tensor CUDA checks (out= ones come first) sets the device.
    "out=": (lambda x, s: torch.index_select(x, 1, torch.tensor([1], device=x.device), out=s.new_empty(2, 1)),
             _wrapper_refuses("self", on="openreg:0")),
}


@pytest.mark.parametrize("case", CPU_SCALAR_ARGUMENTS)
def test_a_cpu_scalar_is_refused_where_cudas_device_check_refuses_it(case):
    """torchgen wraps each CUDA kernel of an op without `device_check: NoCheck` in a check that all tensors among
    its out= and positional arguments are on one device, 0-dim CPU ones too: `x.clamp(max=torch.tensor(3.))` raises
    on CUDA ("... argument max in method wrapper_CUDA_clamp_Tensor", pytorch/pytorch#94174), where TensorIterator
    ops take one CPU scalar. openreg accepted them everywhere, so code that fails on CUDA passed on openreg.
    index_fill is unchecked, but its kernel views the index with the input's rank for a TensorIterator, which refuses
    it there as a second device. Where the scalar is taken, the result is the CPU's."""
    fn, error = CPU_SCALAR_ARGUMENTS[case]
    x = torch.arange(1.0, 7.0).reshape(2, 3)
    s = torch.tensor(2.0)
    if error is None:
        assert_close(fn(x.to("openreg"), s).cpu(), fn(x, s))
        return
    with pytest.raises(RuntimeError, match=error):
        fn(x.to("openreg"), s)
    assert_close(fn(x.to("openreg"), s.to("openreg")).cpu(), fn(x, s))


@pytest.mark.parametrize("indexed, index", [("cpu", "openreg"), ("openreg", "openreg:1")])
def test_indices_on_another_device_fail_as_indexing_reports_it(indexed, index):
    """Indexing checks its indices' device first, naming the indexed tensor's device, as it does on CUDA."""
    x = torch.arange(24.0, device=indexed).reshape(2, 4, 3)
    i = torch.tensor([0, 2], device=index)
    # `:` and `None` leave slots of the index list empty, and a CPU index may sit beside the wrong one.
    for where in ((i,), (torch.tensor([True, False], device=index),), (slice(None), i, None, 0),
                  (slice(None), torch.tensor([1, 3]), None, i)):
        with pytest.raises(RuntimeError, match=re.escape(
                f"indices should be either on cpu or on the same device as the indexed tensor ({x.device})")):
            x[where]


# What CPU autocast leaves alone on CUDA, it leaves alone on openreg: the CPU kernels openreg runs, at the
# call or while a reading thread runs queued work, and the meta kernels that work out an op's result.
AUTOCAST_CPU_CASES = {
    "result worked out on meta": lambda a, b: torch.ops.aten._cdist_forward(a, b, 2.0, None),
    "sparse op run at the call": lambda a, b: torch.sparse.mm(a.to_sparse(), b.t()),
    "queued matmul": lambda a, b: a @ b.t(),
}


@pytest.mark.parametrize("case", AUTOCAST_CPU_CASES.values(), ids=AUTOCAST_CPU_CASES.keys())
def test_cpu_autocast_leaves_openreg_ops_alone(case):
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(40, 30, generator=g), torch.randn(50, 30, generator=g)
    want = case(a, b)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = case(a.to("openreg"), b.to("openreg"))
        total = got.sum().item()  # a read inside: queued work may run on this thread
    assert got.dtype == want.dtype
    assert_close(got.cpu(), want.to_dense())
    assert total == pytest.approx(want.sum().item(), rel=1e-5)


@pytest.mark.parametrize("module", [torch.nn.LayerNorm, torch.nn.BatchNorm1d])
def test_reductions_give_the_cpus_bits_whatever_the_host_does_meanwhile(module):
    """A reduction's rounding depends on how many threads share it: openreg's kernels keep the device's thread
    count while Python runs, so gradcheck's reentrancy check (two backwards, compared bit for bit) passes as on
    the CPU. The weight and bias gradients sum over 4096 rows."""
    torch.manual_seed(0)
    cpu = module(64, dtype=torch.float64)
    x, grad = torch.randn(4096, 64, dtype=torch.float64), torch.randn(4096, 64, dtype=torch.float64)

    def grads(m, x, grad, busy):
        x = x.clone().requires_grad_()
        out = m(x)
        if x.device.type == "openreg":
            torch.openreg._sleep(50_000_000)  # the backward queues behind it, run while the host spins
        got = torch.autograd.grad(out, (x, m.weight, m.bias), grad)
        end = time.perf_counter() + (0.2 if busy else 0)
        while time.perf_counter() < end:
            pass
        return [g.cpu() for g in got]

    expected = grads(cpu, x, grad, busy=False)
    dev = copy.deepcopy(cpu).to("openreg")
    for busy in (True, False, True):
        got = grads(dev, x.to("openreg"), grad.to("openreg"), busy)
        assert all(torch.equal(g, e) for g, e in zip(got, expected, strict=True)), busy


def _nested(d):
    return torch.nested.nested_tensor([torch.ones(2, 3), torch.full((1, 3), 2.0)], device=d)


def _quantized(d):
    return torch.quantize_per_tensor(torch.arange(4.0, device=d), 0.5, 0, torch.qint8)


def _members(t):
    """The tensor's device and those of the memory it is made of."""
    if t.is_nested:
        parts = [t.values()]
    elif t.layout == torch.sparse_coo:
        parts = [t._indices(), t._values()]
    else:
        parts = []
    storage = [] if t.is_nested or t.layout != torch.strided else [t.untyped_storage().device]
    return {t.device, *(p.device for p in parts), *storage}


def _dense(t):
    return t.to_padded_tensor(0) if t.is_nested else t.to_dense() if t.is_sparse else t.dequantize()


# Sparse, quantized and nested tensors made for another openreg device than the current one: ATen's kernels for
# them make them on the current device unless a device guard switches first, as CUDA's generated wrappers do.
ON_DEVICE_1 = {
    "nested .to": (lambda: _nested("openreg").to("openreg:1"), _nested("cpu").to_padded_tensor(0)),
    "nested zeros_like": (lambda: torch.zeros_like(_nested("openreg"), device="openreg:1"), torch.zeros(2, 2, 3)),
    "sparse .to": (lambda: torch.eye(2, device="openreg").to_sparse().to("openreg:1"), torch.eye(2)),
    "sparse from the CPU": (lambda: torch.eye(2).to_sparse().to("openreg:1"), torch.eye(2)),
    "sparse empty": (lambda: torch.empty(2, 2, layout=torch.sparse_coo, device="openreg:1"), torch.zeros(2, 2)),
    "sparse empty_like": (lambda: torch.empty_like(torch.eye(2, device="openreg:1").to_sparse()), torch.zeros(2, 2)),
    "quantized empty": (lambda: torch._empty_affine_quantized([4], scale=0.5, zero_point=0, dtype=torch.qint8,
                                                              device="openreg:1"), None),
    "quantized from the CPU": (lambda: _quantized("cpu").to("openreg:1"), _quantized("cpu").dequantize()),
    "quantized .to": (lambda: _quantized("openreg").to("openreg:1"), _quantized("cpu").dequantize()),
}


@pytest.mark.filterwarnings("ignore::UserWarning")  # the strided nested API is a prototype
@pytest.mark.parametrize("case", ON_DEVICE_1)
def test_layout_tensors_are_made_on_the_device_the_call_names(case):
    if torch.openreg.device_count() < 2:
        pytest.skip("needs two openreg devices")
    make, values = ON_DEVICE_1[case]
    result = make()
    assert _members(result) == {torch.device("openreg", 1)}
    if values is not None:
        assert_close(_dense(result).cpu(), values)


NO_CPU_KERNEL = {
    "sparse": lambda d: torch.eye(2, device=d).to_sparse(),
    "sparse compressed": lambda d: torch.eye(2, device=d).to_sparse_csr(),
    "quantized": _quantized,
    "nested": _nested,
}


@pytest.mark.filterwarnings("ignore::UserWarning")  # the strided nested API is a prototype
@pytest.mark.parametrize("layout", NO_CPU_KERNEL)
def test_an_op_the_cpu_has_no_kernel_for_raises_the_dispatchers_error(layout):
    """The CPU's first sentence, naming openreg's dispatch key where the CPU's names its own (as CUDA's names
    SparseCUDA), so that code matching it sees the same; then how to go on."""
    raised = {}
    for d in ("cpu", "openreg"):
        with pytest.raises(NotImplementedError) as info:
            torch.cumsum(NO_CPU_KERNEL[layout](d), 0)
        raised[d] = str(info.value)
    key = re.search(r"from the '(\w*)CPU' backend\.", raised["cpu"])
    first = raised["cpu"][: key.end()].replace(key.group(0), f"from the '{key.group(1)}PrivateUse1' backend.")
    assert raised["openreg"].startswith(first)
    assert f"openreg runs the CPU's kernels for its {layout} tensors" in raised["openreg"]


@pytest.mark.parametrize("op", [torch.Tensor.int_repr, torch.Tensor.q_scale, torch.Tensor.q_per_channel_scales],
                         ids=lambda op: op.__name__)
def test_a_dense_op_the_cpu_has_no_kernel_for_raises_the_dispatchers_error(op):
    """The quantized inspectors on a dense tensor: the CPU, and CUDA, have no dense kernel for them."""
    raised = {}
    for d in ("cpu", "openreg"):
        with pytest.raises(NotImplementedError) as info:
            op(torch.ones(3, device=d))
        raised[d] = str(info.value)
    first = raised["cpu"][: raised["cpu"].index(" backend.") + len(" backend.")]
    assert raised["openreg"].startswith(first.replace("'CPU'", "'PrivateUse1'"))
