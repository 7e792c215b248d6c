"""Random-number ops on openreg: reproducibility, generator isolation, and
distribution sanity.

openreg's numbers need not equal the CPU's for one seed (CUDA's don't either),
so these tests compare openreg with itself and with the properties every
correct sampler has.
"""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
import torch.utils.checkpoint

import openreg_eager  # noqa: F401  (registers the openreg kernels)

D0 = torch.device("openreg:0")
D1 = torch.device("openreg:1")


def _probs(device):
    return torch.tensor([[0.1, 0.0, 0.5, 0.4], [0.25, 0.25, 0.25, 0.25]], device=device)


# name -> function(device, generator) drawing random numbers on `device`
DRAWS = {
    "rand": lambda d, g: torch.rand(64, device=d, generator=g),
    "randn": lambda d, g: torch.randn(4, 16, device=d, generator=g),
    "randint": lambda d, g: torch.randint(-5, 17, (64,), device=d, generator=g),
    "normal_": lambda d, g: torch.empty(64, device=d).normal_(2.0, 3.0, generator=g),
    "uniform_": lambda d, g: torch.empty(64, device=d).uniform_(-2.0, 5.0, generator=g),
    "normal": lambda d, g: torch.normal(torch.zeros(64, device=d), torch.ones(64, device=d), generator=g),
    "bernoulli": lambda d, g: torch.bernoulli(torch.full((64,), 0.3, device=d), generator=g),
    "bernoulli_p": lambda d, g: torch.empty(64, device=d).bernoulli_(0.7, generator=g),
    "multinomial": lambda d, g: torch.multinomial(_probs(d), 3, replacement=False, generator=g),
    "multinomial_replacement": lambda d, g: torch.multinomial(_probs(d), 20, replacement=True, generator=g),
    "randperm": lambda d, g: torch.randperm(50, device=d, generator=g),
    "exponential_": lambda d, g: torch.empty(64, device=d).exponential_(2.0, generator=g),
    "random_": lambda d, g: torch.empty(64, dtype=torch.int64, device=d).random_(0, 100, generator=g),
}

# Ops without a generator argument: they draw from the default generator.
DEFAULT_ONLY = {
    "dropout": lambda d: F.dropout(torch.ones(64, device=d), p=0.4, training=True),
    "rand_like": lambda d: torch.rand_like(torch.empty(8, 8, device=d)),
    "randn_like": lambda d: torch.randn_like(torch.empty(8, 8, device=d)),
    "randint_like": lambda d: torch.randint_like(torch.empty(8, 8, device=d), 3, 9),
}

def _with_default_generator(draw):
    return lambda d: draw(d, None)


ALL_DEFAULT = {**{k: _with_default_generator(f) for k, f in DRAWS.items()}, **DEFAULT_ONLY}


def _drain():
    """Waits for queued draws before re-seeding or reading generator state. Without it the
    reproducibility tests below would also depend on *when* a queued kernel consumes the
    generator; that is tested on its own, deterministically, in the `*_after_queued_draw` tests."""
    for i in range(torch.openreg.device_count()):
        torch.openreg.synchronize(i)


def _assert_equal(a, b):
    torch.testing.assert_close(a.cpu(), b.cpu(), rtol=0, atol=0)


@pytest.mark.parametrize("name", list(ALL_DEFAULT))
def test_torch_manual_seed_reproduces(name):
    draw = ALL_DEFAULT[name]
    torch.manual_seed(123)
    a = draw(D0)
    b = draw(D0)
    _drain()
    torch.manual_seed(123)
    a2 = draw(D0)
    b2 = draw(D0)
    assert a.device == D0
    _assert_equal(a, a2)
    _assert_equal(b, b2)
    if name not in ("bernoulli", "bernoulli_p", "multinomial", "randint_like", "dropout"):
        # Two consecutive draws differ: the generator advances.
        assert not torch.equal(a.cpu(), b.cpu()), f"{name}: two draws in a row gave the same numbers"


@pytest.mark.parametrize("name", ["rand", "randn", "randint", "dropout", "randperm", "multinomial"])
def test_openreg_manual_seed_reproduces(name):
    draw = ALL_DEFAULT[name]
    torch.openreg.manual_seed(7)
    a = draw(D0)
    _drain()
    torch.openreg.manual_seed(7)
    _assert_equal(a, draw(D0))
    assert torch.openreg.initial_seed() == 7


def test_different_seeds_give_different_numbers():
    torch.manual_seed(1)
    a = torch.rand(100, device=D0)
    _drain()
    torch.manual_seed(2)
    b = torch.rand(100, device=D0)
    assert not torch.equal(a.cpu(), b.cpu())


@pytest.mark.parametrize("name", list(DRAWS))
def test_explicit_generator_reproduces_and_leaves_default_alone(name):
    draw = DRAWS[name]
    g = torch.Generator(device="openreg")
    assert g.device.type == "openreg"
    default_state = torch.openreg.get_rng_state(0)
    g.manual_seed(2024)
    a = draw(D0, g)
    _drain()
    g.manual_seed(2024)
    b = draw(D0, g)
    _assert_equal(a, b)
    torch.openreg.synchronize()
    _assert_equal(torch.openreg.get_rng_state(0), default_state)


# ATen's check_generator sentence (ATen/core/DistributionsHelper.h), which CUDA's kernels give for a CPU generator,
# and the CPU's for a CUDA one: a DataLoader's RandomSampler given a device generator raises it on CUDA.
def _wrong_generator(expected, found):
    return re.escape(f"Expected a '{expected}' device type for generator but found '{found}'")


@pytest.mark.parametrize("name", list(DRAWS))
def test_a_generator_of_another_device_is_refused_at_the_call(name):
    draw = DRAWS[name]
    with pytest.raises(RuntimeError, match=_wrong_generator("openreg", "cpu")):
        draw(D0, torch.Generator("cpu"))
    with pytest.raises(RuntimeError, match=_wrong_generator("cpu", "openreg")):
        draw("cpu", torch.Generator("openreg"))
    torch.openreg.synchronize()  # nothing was left to fail later


def test_a_samplers_device_generator_is_refused_as_on_cuda():
    sampler = torch.utils.data.RandomSampler(range(5), generator=torch.Generator("openreg"))
    with pytest.raises(RuntimeError, match=_wrong_generator("cpu", "openreg")):
        list(sampler)
    assert sorted(torch.utils.data.RandomSampler(range(5), generator=torch.Generator("cpu"))) == list(range(5))


def test_generator_state_roundtrip():
    g = torch.Generator(device="openreg").manual_seed(5)
    torch.rand(10, device=D0, generator=g)
    _drain()
    state = g.get_state()
    a = torch.randn(10, device=D0, generator=g)
    _drain()
    g.set_state(state)
    _assert_equal(a, torch.randn(10, device=D0, generator=g))


def test_default_rng_state_roundtrip():
    torch.manual_seed(0)
    torch.rand(10, device=D0)
    _drain()
    state = torch.openreg.get_rng_state()
    a = torch.randn(10, device=D0)
    b = F.dropout(torch.ones(10, device=D0), 0.5)
    _drain()
    torch.openreg.set_rng_state(state)
    _assert_equal(a, torch.randn(10, device=D0))
    _assert_equal(b, F.dropout(torch.ones(10, device=D0), 0.5))


def test_fork_rng_restores_openreg_state():
    torch.manual_seed(0)
    before = torch.openreg.get_rng_state(0)
    with torch.random.fork_rng(devices=[0], device_type="openreg"):
        torch.rand(100, device=D0)
        _drain()
    _assert_equal(torch.openreg.get_rng_state(0), before)


def test_each_draw_moves_the_philox_offset_and_a_saved_state_draws_again():
    # CUDA's generator state is (seed, offset), which libraries read and set (their own Philox kernels, DTensor).
    g = torch.Generator(device=D0).manual_seed(3)
    first = torch.rand(100, device=D0, generator=g)
    state = g.get_state()
    assert g.get_offset() > 0
    second = torch.rand(100, device=D0, generator=g)
    assert not torch.equal(first.cpu(), second.cpu())
    g.set_state(state)
    _assert_equal(torch.rand(100, device=D0, generator=g), second)
    g.set_offset(0)
    _assert_equal(torch.rand(100, device=D0, generator=g), first)


@pytest.mark.parametrize("use_reentrant", [True, False])
@pytest.mark.parametrize("device", ["cpu", D0])
def test_checkpoint_recomputes_the_same_dropout_masks(device, use_reentrant):
    # torch.utils.checkpoint restores the device's RNG state for the recomputed forward only when the device
    # module says it is initialised (`torch.<device>._initialized`); otherwise the gradients use other masks.
    torch.manual_seed(0)
    layer = torch.nn.Linear(16, 16).to(device)
    x = torch.randn(8, 16, device=device, requires_grad=True)

    def forward(t):
        return F.dropout(layer(t), 0.5, training=True)

    grads = []
    for run in (forward, lambda t: torch.utils.checkpoint.checkpoint(forward, t, use_reentrant=use_reentrant)):
        torch.manual_seed(1)
        run(x).sum().backward()  # reentrant checkpointing refuses torch.autograd.grad
        grads.append(x.grad)
        x.grad = None
    _assert_equal(*grads)


@pytest.mark.parametrize("name", list(ALL_DEFAULT))
def test_drawing_on_device0_leaves_device1_generator_alone(name):
    draw = ALL_DEFAULT[name]
    torch.manual_seed(0)
    state1 = torch.openreg.get_rng_state(1)
    state0 = torch.openreg.get_rng_state(0)
    draw(D0)
    draw(D0)
    torch.openreg.synchronize()
    _assert_equal(torch.openreg.get_rng_state(1), state1)
    assert not torch.equal(torch.openreg.get_rng_state(0), state0), f"{name} did not advance openreg:0's generator"


@pytest.mark.parametrize("name", ["rand", "randn", "dropout", "randperm", "bernoulli"])
def test_drawing_on_device1_uses_device1_generator(name):
    draw = ALL_DEFAULT[name]
    torch.manual_seed(0)
    state0 = torch.openreg.get_rng_state(0)
    state1 = torch.openreg.get_rng_state(1)
    out = draw(D1)  # current device is 0
    assert out.device == D1
    torch.openreg.synchronize(1)
    _assert_equal(torch.openreg.get_rng_state(0), state0)
    assert not torch.equal(torch.openreg.get_rng_state(1), state1)


def test_devices_are_seeded_independently():
    torch.openreg.manual_seed_all(3)
    a0 = torch.rand(20, device=D0)
    a1 = torch.rand(20, device=D1)
    _drain()
    torch.openreg.manual_seed_all(3)
    torch.rand(1000, device=D1)  # consuming numbers on device 1 does not change device 0's sequence
    _assert_equal(torch.rand(20, device=D0), a0)
    _drain()
    with torch.openreg.device(1):
        torch.openreg.manual_seed(3)  # seeds the current device only
    _assert_equal(torch.rand(20, device=D1), a1)


# --------------------------------------------------------------------------- the generator is consumed at launch


def test_manual_seed_after_queued_draw():
    """Re-seeding right after queuing a draw must not change the numbers that draw gets."""
    torch.manual_seed(11)
    torch.openreg._sleep(100_000_000)
    a = torch.rand(16, device=D0)
    torch.manual_seed(11)
    b = torch.rand(16, device=D0)
    _assert_equal(a, b)


def test_get_rng_state_after_queued_draw():
    """The state read right after queuing a draw is the state after that draw, as on CUDA."""
    torch.manual_seed(11)
    torch.openreg._sleep(100_000_000)
    torch.rand(16, device=D0)
    state = torch.openreg.get_rng_state()
    b = torch.rand(16, device=D0)
    torch.openreg.set_rng_state(state)
    _assert_equal(torch.rand(16, device=D0), b)


def test_fork_rng_with_queued_draw():
    """fork_rng restores the state on exit; a draw queued inside must not advance the restored state."""
    torch.manual_seed(0)
    before = torch.openreg.get_rng_state(0)
    with torch.random.fork_rng(devices=[0], device_type="openreg"):
        torch.openreg._sleep(100_000_000)
        torch.rand(100, device=D0)
    torch.openreg.synchronize()
    _assert_equal(torch.openreg.get_rng_state(0), before)


def test_generator_reseed_after_queued_draw():
    g = torch.Generator(device="openreg").manual_seed(9)
    torch.openreg._sleep(100_000_000)
    a = torch.randn(16, device=D0, generator=g)
    g.manual_seed(9)
    b = torch.randn(16, device=D0, generator=g)
    _assert_equal(a, b)


# --------------------------------------------------------------------------- shapes, dtypes, ranges


def test_rand_shape_dtype_range():
    torch.manual_seed(0)
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        x = torch.rand(3, 1000, device=D0, dtype=dtype)
        assert x.shape == (3, 1000) and x.dtype == dtype and x.device == D0
        c = x.cpu()
        assert c.min() >= 0 and c.max() < 1, dtype
    x = torch.rand(0, device=D0)
    assert x.shape == (0,)


def test_randint_bounds_and_dtype():
    torch.manual_seed(0)
    x = torch.randint(-5, 17, (10000,), device=D0).cpu()
    assert x.dtype == torch.int64
    assert x.min() == -5 and x.max() == 16  # every value of a 22-value range shows up in 10k draws
    y = torch.randint(10, (100,), device=D0, dtype=torch.int32).cpu()
    assert y.dtype == torch.int32 and y.min() >= 0 and y.max() < 10
    z = torch.randint_like(torch.empty(100, device=D0), 3, 9).cpu()
    assert z.dtype == torch.float32 and z.min() >= 3 and z.max() < 9 and torch.equal(z, z.floor())


def test_uniform_normal_exponential_ranges():
    torch.manual_seed(0)
    u = torch.empty(10000, device=D0).uniform_(-2.0, 5.0).cpu()
    assert u.min() >= -2.0 and u.max() < 5.0
    assert abs(u.mean().item() - 1.5) < 0.1
    n = torch.empty(100000, device=D0).normal_(2.0, 3.0).cpu()
    assert abs(n.mean().item() - 2.0) < 0.05 and abs(n.std().item() - 3.0) < 0.05
    e = torch.empty(100000, device=D0).exponential_(2.0).cpu()
    assert e.min() >= 0 and abs(e.mean().item() - 0.5) < 0.02


def test_bernoulli_values_and_rate():
    torch.manual_seed(0)
    p = torch.full((100000,), 0.3, device=D0)
    b = torch.bernoulli(p).cpu()
    assert b.dtype == torch.float32
    assert set(b.unique().tolist()) == {0.0, 1.0}
    assert abs(b.mean().item() - 0.3) < 0.01
    probs = torch.tensor([0.0, 1.0] * 50, device=D0)
    _assert_equal(torch.bernoulli(probs), probs)


@pytest.mark.parametrize("p", [0.2, 0.5])
def test_dropout_rate_and_scaling(p):
    torch.manual_seed(0)
    x_cpu = torch.rand(100000) + 0.5
    x = x_cpu.to(D0)
    y = F.dropout(x, p=p, training=True).cpu()
    zeros = y == 0
    assert abs(zeros.float().mean().item() - p) < 0.01
    torch.testing.assert_close(y[~zeros], x_cpu[~zeros] / (1 - p))
    # Eval mode is the identity, and so is p=0.
    _assert_equal(F.dropout(x, p=p, training=False), x_cpu)
    _assert_equal(F.dropout(x, p=0.0, training=True), x_cpu)


def test_dropout_module_backward_masks_gradient():
    torch.manual_seed(0)
    x = torch.ones(1000, device=D0, requires_grad=True)
    y = torch.nn.Dropout(0.5)(x)
    y.sum().backward()
    torch.testing.assert_close(x.grad.cpu(), y.detach().cpu())


def test_multinomial():
    torch.manual_seed(0)
    probs_cpu = _probs("cpu")
    s = torch.multinomial(_probs(D0), 3, replacement=False).cpu()
    assert s.shape == (2, 3) and s.dtype == torch.int64
    for row, p in zip(s, probs_cpu, strict=False):
        assert len(set(row.tolist())) == 3, "sampling without replacement repeated a category"
        assert all(p[i] > 0 for i in row.tolist()), "a zero-probability category was drawn"
    r = torch.multinomial(_probs(D0)[0], 20000, replacement=True).cpu()
    assert (r != 1).all()
    freq = torch.bincount(r, minlength=4).float() / r.numel()
    torch.testing.assert_close(freq, probs_cpu[0], atol=0.02, rtol=0)


def test_randperm_is_a_permutation():
    torch.manual_seed(0)
    for n in (1, 7, 1000, 5000):
        p = torch.randperm(n, device=D0)
        assert p.device == D0 and p.dtype == torch.int64
        _assert_equal(p.cpu().sort().values, torch.arange(n))
    p = torch.randperm(10, device=D0, dtype=torch.int32).cpu()
    assert p.dtype == torch.int32
    _assert_equal(p.sort().values, torch.arange(10, dtype=torch.int32))


def test_like_functions_follow_input():
    base = torch.empty(3, 5, device=D1, dtype=torch.float64)
    for fn in (torch.rand_like, torch.randn_like):
        out = fn(base)
        assert out.shape == base.shape and out.dtype == base.dtype and out.device == D1
    r = torch.rand_like(base).cpu()
    assert r.min() >= 0 and r.max() < 1


def test_randn_distribution():
    torch.manual_seed(0)
    x = torch.randn(100000, device=D0)
    assert x.dtype == torch.float32
    c = x.cpu()
    assert abs(c.mean().item()) < 0.02
    assert abs(c.std().item() - 1.0) < 0.02
    # Roughly normal: ~68% within one standard deviation.
    assert abs((c.abs() < 1).float().mean().item() - 0.6827) < 0.01
    x64 = torch.randn(100000, device=D0, dtype=torch.float64).cpu()
    assert abs(x64.mean().item()) < 0.02 and abs(x64.std().item() - 1.0) < 0.02


def test_rand_distribution():
    torch.manual_seed(0)
    c = torch.rand(100000, device=D0).cpu()
    assert abs(c.mean().item() - 0.5) < 0.01
    assert abs(c.std().item() - (1 / 12) ** 0.5) < 0.01
    hist = torch.histc(c, bins=10, min=0, max=1) / c.numel()
    torch.testing.assert_close(hist, torch.full((10,), 0.1), atol=0.01, rtol=0)
