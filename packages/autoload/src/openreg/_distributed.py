"""Names orccl, openreg's c10d backend (in openreg-eager), as the openreg device's backend for
torch.distributed. Registering is cheap (torch.distributed is imported with torch); the eager layer loads only
when a process group creates the backend."""

from __future__ import annotations

from collections.abc import Callable

BACKEND = "orccl"


def register(load: Callable[[], None]) -> None:
    import torch.distributed as dist

    if not dist.is_available() or BACKEND.upper() in dist.Backend._plugins:
        return

    def create(store, rank, size, timeout):
        load()  # a broken layer raises LoadError here, naming it
        from openreg_eager import distributed

        return distributed.create(store, rank, size, timeout)

    dist.Backend.register_backend(BACKEND, create, devices=["openreg"])
