"""`torch.compile(..., options={"openreg.<key>": value})`: validated, applied to openreg_inductor.config
for that compilation only, part of the FX graph cache key, and each key changes what it says."""

from __future__ import annotations

import re
import sys
import time
import types

import pytest
import torch
from torch._dynamo.utils import counters
from torch._inductor.compile_fx import compile_fx
from torch._inductor.utils import fresh_cache, run_and_get_code

import openreg_inductor


def f(x, y):
    return (x.sin() * y + 1).relu()


@pytest.fixture(autouse=True)
def _reset():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _inputs(device="openreg"):
    torch.manual_seed(0)
    return torch.randn(32, 64, device=device), torch.randn(32, 64, device=device)


def test_unknown_key_lists_the_valid_ones():
    expected = r"Unknown option 'openreg.vector_width'.*openreg.async_launch.*openreg.simdlen"
    with pytest.raises(RuntimeError, match=expected):
        torch.compile(f, options={"openreg.vector_width": 256})


@pytest.mark.parametrize("key, value", [("openreg.simdlen", "avx2"), ("openreg.simdlen", 256.0),
                                        ("openreg.simdlen", True), ("openreg.async_launch", 1.5),
                                        ("openreg.async_launch", 1), ("openreg.async_launch", None)])
def test_a_value_of_the_wrong_type_is_refused(key, value):
    with pytest.raises(RuntimeError, match=f"Option '{key}' takes .*, not {re.escape(repr(value))}$"):
        torch.compile(f, options={key: value})


@pytest.mark.parametrize("simdlen", [3, -1, 0, 128 * 3, 1024])
def test_a_simdlen_no_vector_isa_of_the_host_has_is_refused_with_the_valid_ones(simdlen):
    # Inductor would generate scalar code for it without a word.
    with pytest.raises(RuntimeError, match=r"^Option 'openreg.simdlen' takes None \(the host's widest\), ") as error:
        torch.compile(f, options={"openreg.simdlen": simdlen})
    assert str(error.value).endswith(f" on this host, not {simdlen}")
    for width in openreg_inductor.config.choices("simdlen"):
        assert f"{width!r} (" in str(error.value)
    with pytest.raises(RuntimeError, match="^Option 'openreg.simdlen' takes"):  # compile_fx's config_patches
        compile_fx(torch.fx.symbolic_trace(f), list(_inputs()), config_patches={"openreg.simdlen": simdlen})


def test_each_simdlen_offered_makes_vector_code():
    x, y = _inputs()
    widths = [w for w in openreg_inductor.config.choices("simdlen") if w not in (None, 1)]
    for simdlen in widths:
        torch._dynamo.reset()
        out, (code,) = run_and_get_code(torch.compile(f, options={"openreg.simdlen": simdlen}), x, y)
        torch.testing.assert_close(out.cpu(), f(x.cpu(), y.cpu()))
        assert "at::vec::Vectorized" in code, simdlen


def test_keys_that_are_not_strings_are_left_to_inductor():
    with pytest.raises(AttributeError) as torch_error:
        torch.compile(f, options={5: 1})
    with pytest.raises(AttributeError, match=re.escape(str(torch_error.value))):
        torch.compile(f, options={"openreg.simdlen": 1, 5: 1})


def test_inductor_options_still_work_beside_openreg_ones():
    x, y = _inputs()
    out = torch.compile(f, options={"openreg.simdlen": 1, "max_autotune": False})(x, y)
    torch.testing.assert_close(out.cpu(), f(x.cpu(), y.cpu()))
    with pytest.raises(RuntimeError, match="Unexpected optimization option not_an_option"):
        torch.compile(f, options={"openreg.simdlen": 1, "not_an_option": 1})


@pytest.mark.parametrize("simdlen, vectorized", [(None, True), (1, False)])
def test_simdlen_chooses_vector_or_scalar_kernels(simdlen, vectorized):
    x, y = _inputs()
    out, (code,) = run_and_get_code(torch.compile(f, options={"openreg.simdlen": simdlen}), x, y)
    torch.testing.assert_close(out.cpu(), f(x.cpu(), y.cpu()))
    assert ("at::vec::Vectorized" in code) == vectorized
    assert openreg_inductor.config.simdlen is None  # patched for that compilation only


@pytest.mark.parametrize("async_launch", [True, False])
def test_async_launch_decides_whether_a_call_waits_for_its_kernels(async_launch):
    x, y = _inputs()
    compiled = torch.compile(f, options={"openreg.async_launch": async_launch})
    compiled(x, y)
    torch.openreg.synchronize()
    torch.openreg._sleep(400_000_000)  # the stream is busy for 400 ms
    start = time.perf_counter()
    out = compiled(x, y)
    elapsed = time.perf_counter() - start
    if async_launch:
        assert elapsed < 0.2, f"the call waited {elapsed:.3f} s for the stream"
    else:
        assert elapsed >= 0.35, f"the call returned after {elapsed:.3f} s, before its kernel could run"
    torch.testing.assert_close(out.cpu(), f(x.cpu(), y.cpu()))


def test_options_are_part_of_the_fx_graph_cache_key():
    x, y = _inputs()

    def compile_with(simdlen):
        torch._dynamo.reset()
        torch.compile(f, options={"openreg.simdlen": simdlen})(x, y)

    with fresh_cache():
        counters.clear()
        compile_with(1)
        compile_with(None)
        assert (counters["inductor"]["fxgraph_cache_miss"], counters["inductor"]["fxgraph_cache_hit"]) == (2, 0)
        compile_with(1)
        assert counters["inductor"]["fxgraph_cache_hit"] == 1


def test_the_cache_key_covers_openregs_patches_to_torch(tmp_path, monkeypatch):
    """openreg._torch_patches decides some of what a graph compiles to (FakeTensor's convolution layouts): a graph
    cached under other patches is not reused, as it is not under another openreg-inductor."""
    from openreg_inductor import _digest

    assert "openreg._torch_patches" in sys.modules  # installed at import torch
    before = _digest.sources_digest()
    other = tmp_path / "_torch_patches.py"
    other.write_text("# other patches\n")
    monkeypatch.setitem(sys.modules, "openreg._torch_patches", types.SimpleNamespace(__file__=str(other)))
    assert _digest.sources_digest() != before
