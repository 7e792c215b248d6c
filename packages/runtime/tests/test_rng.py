"""Generators: per-device defaults, seeding, state round trips."""

import pytest
import torch


def test_generator_device(two_devices):
    g = torch.Generator(device="openreg:1")
    assert g.device == torch.device("openreg:1")
    g0 = torch.Generator(device="openreg")
    assert g0.device == torch.device("openreg:0")
    assert torch.openreg.default_generators[1].device == torch.device("openreg:1")
    assert len(torch.openreg.default_generators) == torch.openreg.device_count()


def test_generator_for_invalid_device_is_an_error():
    with pytest.raises(RuntimeError):
        torch.Generator(device="openreg:9")


def test_same_seed_same_state():
    a = torch.Generator(device="openreg").manual_seed(1234)
    b = torch.Generator(device="openreg:1").manual_seed(1234)
    c = torch.Generator(device="openreg").manual_seed(4321)
    assert a.initial_seed() == 1234
    assert torch.equal(a.get_state(), b.get_state())
    assert not torch.equal(a.get_state(), c.get_state())
    torch.openreg.manual_seed(1234)
    assert torch.equal(torch.openreg.get_rng_state(), a.get_state())


def test_manual_seed_and_initial_seed(two_devices):
    torch.openreg.manual_seed(42)
    assert torch.openreg.initial_seed() == 42
    with torch.openreg.device(1):
        torch.openreg.manual_seed(7)
        assert torch.openreg.initial_seed() == 7
    assert torch.openreg.initial_seed() == 42
    torch.openreg.manual_seed_all(99)
    assert torch.openreg.initial_seed() == 99
    with torch.openreg.device(1):
        assert torch.openreg.initial_seed() == 99


def test_seed_is_nondeterministic():
    torch.openreg.manual_seed(5)
    seeds = set()
    for _ in range(3):
        torch.openreg.seed()
        seeds.add(torch.openreg.initial_seed())
    assert len(seeds) > 1
    assert 5 not in seeds


def test_rng_state_round_trip(two_devices):
    torch.openreg.manual_seed_all(0)
    state = torch.openreg.get_rng_state()
    assert state.dtype == torch.uint8 and state.device == torch.device("cpu")
    torch.openreg.manual_seed(123)
    assert not torch.equal(torch.openreg.get_rng_state(), state)
    torch.openreg.set_rng_state(state)
    assert torch.equal(torch.openreg.get_rng_state(), state)
    # set/get for a named device
    s1 = torch.openreg.get_rng_state("openreg:1")
    torch.openreg.set_rng_state(torch.Generator(device="openreg:1").manual_seed(77).get_state(), "openreg:1")
    assert not torch.equal(torch.openreg.get_rng_state(1), s1)
    torch.openreg.set_rng_state(s1, 1)
    assert torch.equal(torch.openreg.get_rng_state(1), s1)
    # all devices
    states = torch.openreg.get_rng_state_all()
    torch.openreg.manual_seed_all(555)
    torch.openreg.set_rng_state_all(states)
    for got, want in zip(torch.openreg.get_rng_state_all(), states, strict=True):
        assert torch.equal(got, want)


def _state(seed: int, offset: int) -> torch.Tensor:
    return torch.tensor([seed, offset], dtype=torch.int64).view(torch.uint8)


def test_state_is_cudas_seed_and_offset():
    # CUDA's Philox state: 8 bytes of seed, 8 of offset; set_offset as CUDA's (multiples of 4).
    g = torch.Generator(device="openreg").manual_seed(8)
    assert torch.equal(g.get_state(), _state(8, 0)) and g.get_offset() == 0
    g.set_offset(12)
    assert torch.equal(g.get_state(), _state(8, 12))
    g.set_state(_state(99, 40))
    assert (g.initial_seed(), g.get_offset()) == (99, 40)
    g.set_state(_state(7, 0)[:8])  # a seed alone, as older releases saved it: offset 0
    assert (g.initial_seed(), g.get_offset()) == (7, 0)
    g.manual_seed(3)
    assert g.get_offset() == 0


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        (lambda g: g.set_offset(6), RuntimeError, "offset must be a multiple of 4"),
        (lambda g: g.set_state(_state(9, 2)), RuntimeError, "offset must be a multiple of 4"),
        (lambda g: g.set_state(torch.zeros(15, dtype=torch.uint8)), RuntimeError, "RNG state is wrong size"),
        (lambda g: g.set_state(torch.zeros(2, dtype=torch.int64)), TypeError, "RNG state must be a torch.ByteTensor"),
    ],
)
def test_bad_state_or_offset_is_refused_and_changes_nothing(change, error, message):
    g = torch.Generator(device="openreg").manual_seed(5)
    g.set_offset(8)
    with pytest.raises(error, match=message):
        change(g)
    assert torch.equal(g.get_state(), _state(5, 8))


def test_torch_manual_seed_seeds_openreg(two_devices):
    torch.manual_seed(2024)
    assert torch.openreg.initial_seed() == 2024
    with torch.openreg.device(1):
        assert torch.openreg.initial_seed() == 2024
    expect = torch.Generator(device="openreg:1").manual_seed(2024).get_state()
    assert torch.equal(torch.openreg.get_rng_state(1), expect)


def test_seeding_one_device_leaves_the_other_alone(two_devices):
    torch.openreg.manual_seed_all(11)
    before1 = torch.openreg.get_rng_state(1).clone()
    before0 = torch.openreg.get_rng_state(0).clone()
    with torch.openreg.device(0):
        torch.openreg.manual_seed(12)
    assert torch.equal(torch.openreg.get_rng_state(1), before1)
    assert not torch.equal(torch.openreg.get_rng_state(0), before0)
    torch.openreg.default_generators[0].manual_seed(13)
    assert torch.equal(torch.openreg.get_rng_state(1), before1)


def test_fork_rng_restores_openreg_state(two_devices):
    torch.openreg.manual_seed_all(3)
    before = [s.clone() for s in torch.openreg.get_rng_state_all()]
    with torch.random.fork_rng(devices=[0, 1], device_type="openreg"):
        torch.openreg.manual_seed_all(4)
        assert not torch.equal(torch.openreg.get_rng_state(0), before[0])
    for got, want in zip(torch.openreg.get_rng_state_all(), before, strict=True):
        assert torch.equal(got, want)


def test_default_rng_state_is_the_current_devices(two_devices):
    torch.openreg.manual_seed_all(0)
    with torch.openreg.device(1):
        torch.openreg.manual_seed(31)
        assert torch.equal(torch.openreg.get_rng_state(), torch.openreg.get_rng_state(1))
    assert not torch.equal(torch.openreg.get_rng_state(), torch.openreg.get_rng_state(1))


def test_state_is_read_under_a_fake_tensor_mode():
    # torch.compile reads RNG states with a fake-tensor mode active (torch 2.14's run_and_save_rng_state).
    from torch._subclasses.fake_tensor import FakeTensorMode

    g = torch.Generator(device="openreg").manual_seed(8)
    with FakeTensorMode():
        state = g.get_state()
    assert torch.equal(state, _state(8, 0))
