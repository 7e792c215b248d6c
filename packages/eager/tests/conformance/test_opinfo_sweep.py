"""OpInfo conformance sweep: the ops of PyTorch's OpInfo database on openreg against the CPU.

For every OpInfo in `op_db` and every dtype the CPU supports among float32, float64, bfloat16,
int64 and bool, sample inputs are run on the CPU and on openreg and the results compared with
`torch.testing.assert_close`:

- the first OPENREG_SWEEP_SAMPLES sample inputs (default 6), plus a non-contiguous (strided)
  copy of the first;
- every input keeps its exact layout on openreg (sizes, strides, storage offset, overlap);
- for differentiable ops in float32 and float64, the input gradients too (a vector-Jacobian
  product with one fixed random cotangent per sample);
- ops whose results depend on the random seed or are uninitialised memory are compared by shape,
  dtype and device only (RANDOM_OPS, UNINITIALISED_OPS), and so are the samples of other ops that
  draw random numbers (RANDOM_SAMPLES);
- ops whose extra results follow CUDA's conventions compare only their first results (CUDA_CONVENTIONS),
  and bfloat16 ops openreg computes in float32 as CUDA does compare with the CPU's float32 result, rounded
  (WIDENED_AS_ON_CUDA);
- a sample the CPU rejects must be rejected on openreg too; samples OpInfo gives the CPU but not CUDA, which
  openreg refuses as CUDA does, are left out (CUDA_SAMPLES), and openreg may refuse a dtype OpInfo does not list
  for CUDA as CUDA does (a NotImplementedError saying so);
- openreg's results are laid out (shapes, significant strides, dtypes) as fake tensors of the same call say,
  which is what torch.compile traces with and, for every device but the CPU, describes CUDA's kernels.

Environment:
    OPENREG_SWEEP_DTYPES   comma-separated subset of float32,float64,bfloat16,int64,bool
                           (default: all five); "none" collects no sweep tests
    OPENREG_SWEEP_SAMPLES  sample inputs per op and dtype (default 6), "all" for every one

Expected failures are in EXPECTED_FAILURES, each with its reason; those that crash the process
are in CRASHES and run in a child process. The conftest next to this file writes
conformance-report.json and conformance-report.md. Running this file as a script checks one case:
`python test_opinfo_sweep.py <op> <dtype>` (that is how CRASHES run).
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._pytree import tree_flatten, tree_map

import openreg_eager  # noqa: F401  (installs the kernels, also where autoload is off)

try:
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.testing._internal.common_utils import noncontiguous_like
except ModuleNotFoundError as exc:  # an environment problem, not a test result: say how to fix it
    raise ImportError(
        f"the OpInfo sweep needs PyTorch's test helpers (torch.testing._internal), which import {exc.name!r}, "
        f"which is not installed: pip install {exc.name}"
    ) from exc

DEVICE = "openreg"
SEED = 1234

ALL_DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "bool": torch.bool,
}
GRAD_DTYPES = (torch.float32, torch.float64)


def _sweep_dtypes() -> list[str]:
    raw = os.environ.get("OPENREG_SWEEP_DTYPES", "").strip()
    if not raw:
        return list(ALL_DTYPES)
    if raw.lower() == "none":
        return []
    names = [d.strip() for d in raw.split(",") if d.strip()]
    bad = [d for d in names if d not in ALL_DTYPES]
    if bad:
        raise ValueError(
            f"OPENREG_SWEEP_DTYPES={raw!r} names unknown dtypes {bad}: use none, or a comma-separated list "
            f"of {', '.join(ALL_DTYPES)}"
        )
    return names


def _samples_per_op() -> int | None:
    raw = os.environ.get("OPENREG_SWEEP_SAMPLES", "").strip() or "6"
    if raw.lower() == "all":
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"OPENREG_SWEEP_SAMPLES={raw!r} is not a sample count: use a positive integer or all")
    return int(raw)


def op_id(op) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


# --- what is compared how ----------------------------------------------------------------------------

# Results that depend on the random seed: compared by shape, dtype and device only.
RANDOM_OPS = {
    "bernoulli": "draws random numbers",
    "cauchy": "draws random numbers",
    "exponential": "draws random numbers",
    "geometric": "draws random numbers",
    "log_normal": "draws random numbers",
    "multinomial": "draws random numbers",
    "normal": "draws random numbers",
    "normal.number_mean": "draws random numbers",
    "normal.in_place": "draws random numbers",
    "rand_like": "draws random numbers",
    "randint": "draws random numbers",
    "randint_like": "draws random numbers",
    "randn": "draws random numbers",
    "randn_like": "draws random numbers",
    "uniform": "draws random numbers",
    "nn.functional.dropout": "random mask",
    "nn.functional.dropout2d": "random mask",
    "nn.functional.dropout3d": "random mask",
    "nn.functional.alpha_dropout": "random mask",
    "nn.functional.feature_alpha_dropout.with_train": "random mask",
    "nn.functional.fractional_max_pool2d": "random pooling regions",
    "nn.functional.fractional_max_pool3d": "random pooling regions",
    "nn.functional.rrelu": "random slopes in training mode",
    "pca_lowrank": "random projections (torch.randn inside)",
    "svd_lowrank": "random projections (torch.randn inside)",
}

# Samples that draw random numbers, of ops otherwise compared by value: compared by shape, dtype and
# device only.
RANDOM_SAMPLES = {
    # openreg's fused attention draws its dropout mask from a seed it keeps for the backward (as flash
    # attention does), not the CPU math backend's sequence of draws.
    "nn.functional.scaled_dot_product_attention": lambda sample: sample.kwargs.get("dropout_p", 0.0) > 0,
    # Its dropout in training (dropout_p is the tenth positional argument after the query).
    "nn.functional.multi_head_attention_forward": lambda sample: sample.kwargs.get("training", True)
    and sample.args[9] > 0,
}

# Samples that OpInfo gives CUDA alone of those it gives the CPU, where openreg refuses the others as CUDA does:
# only those are compared.
CUDA_SAMPLES = {
    # gels is CUDA's only driver (kernels/lstsq.cpp in openreg-eager)
    "linalg.lstsq": lambda sample: sample.kwargs.get("driver", "gels") == "gels",
    "linalg.lstsq.grad_oriented": lambda sample: sample.kwargs.get("driver", "gels") == "gels",
}

# Results that are uninitialised memory: compared by shape, dtype and device only.
UNINITIALISED_OPS = {
    "empty": "uninitialised memory",
    "empty_like": "uninitialised memory",
    "empty_permuted": "uninitialised memory",
    "empty_strided": "uninitialised memory",
    "new_empty": "uninitialised memory",
    "new_empty_strided": "uninitialised memory",
}

# Ops whose positional tensor arguments must stay on the CPU, as on CUDA.
CPU_ARGS = {
    "tensor_split": "a tensor indices_or_sections must be a CPU tensor",
}

# Ops whose extra results follow CUDA's conventions where the CPU's differ (openreg-eager's csrc/kernels;
# test_eager_cuda_conventions.py checks them): only their first results are compared with the CPU's.
CUDA_CONVENTIONS = {
    "native_batch_norm": 1,  # save_mean, save_invstd: CUDA's shapes and dtype
    "_native_batch_norm_legit": 1,
    "_batch_norm_with_update": 1,
    "native_layer_norm": 1,  # mean, rstd: float32 for bfloat16 input
}

# Ops computed in float32 for bfloat16 input, as on CUDA, where the CPU's kernel rounds its statistics to
# bfloat16: the reference is the CPU's float32 result, rounded.
WIDENED_AS_ON_CUDA = {
    "native_batch_norm",
    "_native_batch_norm_legit",
    "_batch_norm_with_update",
    "nn.functional.batch_norm",
    "nn.functional.instance_norm",
}

# --- expected failures ---------------------------------------------------------------------------------
# (op id, dtype name or None for every dtype) -> reason. Marked xfail(strict=True): a case that starts
# passing fails the sweep until its entry is removed.

EXPECTED_FAILURES: dict[tuple[str, str | None], str] = {}

# Expected failures that kill the process: these run in a child process (slower, but the sweep survives).
CRASHES = {key for key, reason in EXPECTED_FAILURES.items() if "SIGSEGV" in reason}


def _expected_failure(name: str, dtype: str) -> str | None:
    return EXPECTED_FAILURES.get((name, dtype)) or EXPECTED_FAILURES.get((name, None))


def _cases():
    for op in op_db:
        supported = op.supported_dtypes("cpu")
        for dtype in _sweep_dtypes():
            if ALL_DTYPES[dtype] not in supported:
                continue
            reason = _expected_failure(op_id(op), dtype)
            marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
            yield pytest.param(op, dtype, id=f"{op_id(op)}-{dtype}", marks=marks)


# --- moving sample inputs ----------------------------------------------------------------------------


def _replicate(t: torch.Tensor, device: str) -> torch.Tensor:
    """A new leaf tensor on `device` with t's values and exact layout (sizes, strides, storage offset)."""
    requires_grad = t.requires_grad
    t = t.detach()
    if t.layout != torch.strided or t.is_quantized or t.is_nested:
        out = t.to(device, copy=True)
    else:
        t = t.resolve_conj().resolve_neg()
        n = t.untyped_storage().nbytes() // t.element_size()
        flat = t.as_strided((n,), (1,), 0)
        flat = flat.clone() if device == "cpu" else flat.to(device)
        out = flat.as_strided(t.size(), t.stride(), t.storage_offset())
    return out.requires_grad_(requires_grad)


def _move(obj, device: str, memo: dict):
    """Maps every tensor (and 'cpu' device argument) in a sample's input/args/kwargs to `device`;
    a tensor that appears twice maps to one tensor."""
    if isinstance(obj, torch.Tensor):
        if id(obj) not in memo:
            memo[id(obj)] = _replicate(obj, device)
        return memo[id(obj)]
    if device != "cpu":
        if isinstance(obj, torch.device) and obj.type == "cpu":
            return torch.device(device)
        if isinstance(obj, str) and obj == "cpu":
            return device
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_move(x, device, memo) for x in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_move(x, device, memo) for x in obj)
    if isinstance(obj, dict):
        return {k: _move(v, device, memo) for k, v in obj.items()}
    return obj


def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _tensors(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from _tensors(x)


def _noncontiguous(sample):
    """The sample with every strided tensor replaced by a non-contiguous copy (sparse ones kept)."""

    def f(t):
        if isinstance(t, torch.Tensor) and t.layout == torch.strided:
            return noncontiguous_like(t)
        return t

    return sample.transform(f)


# --- running and comparing ---------------------------------------------------------------------------


def _layout(t: torch.Tensor):
    """Shape, dtype, and the strides of the dimensions longer than 1 (the others' strides are arbitrary)."""
    if t.layout != torch.strided:
        return tuple(t.shape), t.dtype, t.layout
    return tuple(t.shape), t.dtype, tuple(st for st, n in zip(t.stride(), t.shape, strict=True) if n > 1)


def _layouts(output) -> list:
    return [_layout(t) if isinstance(t, torch.Tensor) else None for t in tree_flatten(output)[0]]


def _traced_layouts(op, input, args, kwargs):
    """The layouts of op's results on fake copies of the arguments (taken before the real call, which may change
    them in place), or None where fake tensors cannot run it (no meta kernel, results sized by values)."""
    mode = FakeTensorMode()
    try:
        fake = tree_map(lambda t: mode.from_tensor(t) if isinstance(t, torch.Tensor) else t, (input, args, kwargs))
        with mode:
            return _layouts(op(fake[0], *fake[1], **fake[2]))
    except Exception:  # what fake tensors cannot trace, torch.compile does not trace either
        return None


def _compare_layouts(actual: Run, where: str) -> None:
    got = _layouts(actual.output)
    assert actual.traced is None or got == actual.traced, (
        f"{where}: openreg laid its results out as {got}, its fake tensors as {actual.traced}"
    )


class Run:
    """One sample on one device: its outputs (or the exception raised) and its input gradients."""

    def __init__(self, op, sample, device: str, cotangent_seed: int | None):
        memo: dict = {}
        self.input = _move(sample.input, device, memo)
        args_device = "cpu" if op_id(op) in CPU_ARGS else device
        self.args = _move(sample.args, args_device, memo)
        self.kwargs = _move(sample.kwargs, device, memo)
        self.error: Exception | None = None
        self.output = None
        self.grads = None
        self.traced = _traced_layouts(op, self.input, self.args, self.kwargs) if device != "cpu" else None
        try:
            self.output = op(self.input, *self.args, **self.kwargs)
            if cotangent_seed is not None:
                self.grads = self._grads(sample, cotangent_seed, device)
            if device != "cpu":
                torch.openreg.synchronize()
        except Exception as exc:  # compared with the other device's behaviour
            self.error = exc

    def _grads(self, sample, seed: int, device: str):
        inputs = [t for t in _tensors((self.input, self.args, self.kwargs)) if t.requires_grad]
        outputs = [
            t
            for t in _tensors(sample.output_process_fn_grad(self.output))
            if t.requires_grad and (t.is_floating_point() or t.is_complex())
        ]
        if not inputs or not outputs:
            return None
        gen = torch.Generator().manual_seed(seed)
        cotangents = [torch.randn(t.shape, dtype=t.dtype, generator=gen).to(device) for t in outputs]
        return torch.autograd.grad(outputs, inputs, cotangents, allow_unused=True)


# Ops that take another (equally valid) algorithm on openreg than on the CPU, with the looser float32
# tolerance that covers it.
ALGORITHM_TOLERANCES = {
    # openreg runs its fused kernel (or the math backend), the CPU its flash kernel: on torch 2.14 float32
    # input gradients differ by up to ~3e-5.
    "nn.functional.scaled_dot_product_attention": {"atol": 1e-4, "rtol": 1e-4},
}


def _tolerances(dtype: torch.dtype, name: str) -> dict:
    if dtype == torch.bfloat16:
        return {"atol": 1e-2, "rtol": 1.6e-2}
    if dtype == torch.float32 and name in ALGORITHM_TOLERANCES:
        return ALGORITHM_TOLERANCES[name]
    return {}


def _compare(actual, expected, where: str, values: bool, tol: dict) -> None:
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{where}: openreg returned {type(actual).__name__}, the CPU a tensor"
        assert actual.device.type == DEVICE or expected.device.type != "cpu", (
            f"{where}: the result is on {actual.device}, expected on {DEVICE}"
        )
        if values:
            torch.testing.assert_close(
                actual.detach().cpu(),
                expected.detach(),
                equal_nan=True,
                msg=lambda m: f"{where}: {m}",
                **tol,
            )
        else:
            got = (actual.shape, actual.dtype, actual.layout)
            want = (expected.shape, expected.dtype, expected.layout)
            assert got == want, f"{where}: openreg returned {got}, the CPU {want}"
    elif isinstance(expected, (list, tuple)) and not isinstance(expected, torch.Size):
        assert isinstance(actual, (list, tuple)) and len(actual) == len(expected), (
            f"{where}: openreg returned {actual!r}, the CPU {expected!r}"
        )
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            _compare(a, e, f"{where}[{i}]", values, tol)
    elif isinstance(expected, Mapping):
        assert isinstance(actual, Mapping) and actual.keys() == expected.keys(), f"{where}: the keys differ"
        for k in expected:
            _compare(actual[k], expected[k], f"{where}[{k!r}]", values, tol)
    elif isinstance(expected, (bool, int, float, complex)):
        if values:
            torch.testing.assert_close(actual, expected, equal_nan=True, msg=lambda m: f"{where}: {m}")
    elif isinstance(expected, Sequence) and not isinstance(expected, str):
        assert list(actual) == list(expected), f"{where}: openreg returned {actual!r}, the CPU {expected!r}"
    else:
        assert actual == expected, f"{where}: openreg returned {actual!r}, the CPU {expected!r}"


def _samples(op, dtype: torch.dtype, requires_grad: bool):
    """The first sample inputs, then a non-contiguous copy of the first, each with a label."""
    torch.manual_seed(SEED)
    given = op.sample_inputs("cpu", dtype, requires_grad=requires_grad)
    cuda_takes = CUDA_SAMPLES.get(op_id(op), lambda sample: True)
    samples = list(itertools.islice(filter(cuda_takes, given), _samples_per_op()))
    labelled = [(f"sample {i}", s) for i, s in enumerate(samples)]
    if samples:
        labelled.append(("non-contiguous sample 0", _noncontiguous(samples[0])))
    return labelled


def _widened(sample):
    return sample.transform(lambda t: t.float() if isinstance(t, torch.Tensor) and t.dtype == torch.bfloat16 else t)


def _rounded(obj, dtype: torch.dtype):
    if isinstance(obj, torch.Tensor):
        return obj.to(dtype) if obj.dtype == torch.float32 else obj
    if isinstance(obj, (list, tuple)):
        return type(obj)(_rounded(o, dtype) for o in obj)
    return obj


def new_info() -> dict:
    """What the report records of one case: gradients checked?, samples checked."""
    return {"gradients": None, "samples": 0}


def _cuda_refuses(op, dtype: torch.dtype, error: BaseException) -> bool:
    """Whether openreg refused, as CUDA does, a dtype that OpInfo lists for the CPU but not for CUDA, or an op
    CUDA's dispatcher has no kernel for (openreg-eager's generic/cuda_refuses.cpp; OpInfo runs some of those on
    the CPU alone, whatever dtypes it lists for CUDA)."""
    if not isinstance(error, NotImplementedError):
        return False
    return ("CUDA has no kernel for it either" in str(error)
            or ("on CUDA, which has no kernel for it" in str(error) and dtype not in op.supported_dtypes("cuda")))


def check(op, dtype_name: str, info: dict) -> None:
    """Runs the samples of `op` in `dtype_name` on openreg and the CPU, filling `info` (see new_info);
    raises on the first difference."""
    dtype = ALL_DTYPES[dtype_name]
    name = op_id(op)
    values = name not in RANDOM_OPS and name not in UNINITIALISED_OPS
    with_grad = dtype in GRAD_DTYPES and op.supports_autograd and dtype in op.supported_backward_dtypes("cpu")
    info["gradients"] = with_grad
    for i, (label, sample) in enumerate(_samples(op, dtype, with_grad)):
        cotangent_seed = SEED + i if with_grad else None
        torch.manual_seed(SEED)
        widen = dtype == torch.bfloat16 and name in WIDENED_AS_ON_CUDA
        expected = Run(op, _widened(sample) if widen else sample, "cpu", cotangent_seed)
        if widen:
            expected.output = _rounded(expected.output, dtype)
        torch.manual_seed(SEED)
        actual = Run(op, sample, DEVICE, cotangent_seed)
        where = f"{label} ({sample.summary()})"
        if expected.error is not None:
            # The CPU rejects this sample: openreg must reject it too.
            assert actual.error is not None, f"{where}: the CPU raised {expected.error!r}, openreg did not"
            continue
        if actual.error is not None:
            if _cuda_refuses(op, dtype, actual.error):
                continue
            raise actual.error
        tol = _tolerances(dtype, op_id(op))
        by_value = values and not (name in RANDOM_SAMPLES and RANDOM_SAMPLES[name](sample))
        _compare_layouts(actual, where)
        compared = CUDA_CONVENTIONS.get(name)
        if compared is not None:
            actual.output, expected.output = actual.output[:compared], expected.output[:compared]
        _compare(actual.output, expected.output, f"{where}: output", by_value, tol)
        if expected.grads is not None or actual.grads is not None:
            _compare(actual.grads, expected.grads, f"{where}: input gradients", by_value, tol)
        info["samples"] += 1


def _check_in_child(op, dtype_name: str) -> dict:
    """check() in a child process, for cases that crash the process."""
    proc = subprocess.run(
        [sys.executable, "-X", "faulthandler", os.path.abspath(__file__), op_id(op), dtype_name],
        capture_output=True,
        text=True,
        timeout=600,
    )
    info = new_info()
    for line in proc.stdout.splitlines():
        if line.startswith("SWEEP-RESULT "):
            info = json.loads(line.split(" ", 1)[1])
    if proc.returncode != 0:
        if proc.returncode < 0:
            died = f"the child process died with {signal.Signals(-proc.returncode).name}"
        else:
            died = f"the child process exited with {proc.returncode}"
        err = proc.stderr.split("\nExtension modules:")[0]
        info["error"] = f"{died}\n--- stderr (tail) ---\n{err[-3000:]}"
    return info


@pytest.mark.parametrize(("op", "dtype"), list(_cases()))
def test_opinfo(op, dtype, record_property):
    if (op_id(op), dtype) in CRASHES or (op_id(op), None) in CRASHES:
        record_property("child_process", True)
        info = _check_in_child(op, dtype)
        for key in ("gradients", "samples"):
            record_property(key, info.get(key))
        if "error" in info:
            pytest.fail(info["error"], pytrace=False)
        return
    info = new_info()
    try:
        check(op, dtype, info)
    finally:
        for key in ("gradients", "samples"):
            record_property(key, info.get(key))


def test_lists_name_real_ops():
    """Every op named in the lists above exists in op_db (a typo would silently change what is checked)."""
    ids = {op_id(op) for op in op_db}
    named = set(RANDOM_OPS) | set(RANDOM_SAMPLES) | set(UNINITIALISED_OPS) | set(CPU_ARGS) | set(ALGORITHM_TOLERANCES)
    named |= set(CUDA_SAMPLES)
    named |= set(CUDA_CONVENTIONS) | WIDENED_AS_ON_CUDA
    named |= {name for name, _ in EXPECTED_FAILURES}
    assert not named - ids, f"not in op_db: {sorted(named - ids)}"
    bad_dtypes = {d for _, d in EXPECTED_FAILURES if d is not None and d not in ALL_DTYPES}
    assert not bad_dtypes, f"unknown dtypes in EXPECTED_FAILURES: {sorted(bad_dtypes)}"


def _main(argv: list[str]) -> int:
    name, dtype = argv
    (op,) = [op for op in op_db if op_id(op) == name]
    info = new_info()
    try:
        check(op, dtype, info)
        return 0
    except BaseException:
        import traceback

        traceback.print_exc()
        return 1
    finally:
        print("SWEEP-RESULT " + json.dumps(info), flush=True)


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
