"""Per-device default generators and the torch.cuda-style seeding functions."""

from __future__ import annotations

import torch

from .. import _C
from ._devices import _DeviceLike, _index


class _DefaultGenerators:
    """Sequence of each device's default generator, created on first access."""

    def __getitem__(self, idx: int) -> torch.Generator:
        if not 0 <= idx < len(self):
            raise IndexError(f"openreg has {len(self)} devices; there is no default generator {idx}")
        return _C.default_generator(idx)

    def __len__(self) -> int:
        return _C.device_count()

    def __iter__(self):
        return (self[i] for i in range(len(self)))


default_generators = _DefaultGenerators()


def _generator(device: _DeviceLike) -> torch.Generator:
    return default_generators[_index(device)]


def manual_seed(seed: int) -> None:
    """Seeds the current device's default generator."""
    _generator(None).manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for gen in default_generators:
        gen.manual_seed(int(seed))


def seed() -> None:
    """Seeds the current device's generator with a non-deterministic number."""
    _generator(None).seed()


def seed_all() -> None:
    value = _generator(None).seed()
    for gen in default_generators:
        gen.manual_seed(value)


def initial_seed() -> int:
    return _generator(None).initial_seed()


def get_rng_state(device: _DeviceLike = "openreg") -> torch.Tensor:
    return _generator(device).get_state()


def set_rng_state(new_state: torch.Tensor, device: _DeviceLike = "openreg") -> None:
    _generator(device).set_state(new_state.cpu())


def get_rng_state_all() -> list[torch.Tensor]:
    return [gen.get_state() for gen in default_generators]


def set_rng_state_all(new_states: list[torch.Tensor]) -> None:
    for gen, state in zip(default_generators, new_states, strict=True):
        gen.set_state(state.cpu())
