"""The runtime suite: copies, allocation and launches on openreg against the CPU."""

import torch

from .harness import Case, Suite

COPY_BYTES = 64 << 20  # 64 MiB of float32


def cases() -> list[Case]:
    n = COPY_BYTES // 4
    env = {
        "torch": torch,
        "host_src": torch.rand(n),
        "host_dst": torch.empty(n),
        "dev_src": torch.rand(n).to("openreg"),
        "dev_dst": torch.empty(n, device="openreg"),
        "a": torch.zeros(1, device="openreg"),
        "b": torch.ones(1, device="openreg"),
        "a_cpu": torch.zeros(1),
        "b_cpu": torch.ones(1),
        # Device objects, so both sides pay the same argument parsing.
        "openreg": torch.device("openreg"),
        "cpu": torch.device("cpu"),
    }
    goal = "bandwidth >= 0.8x CPU memcpy"
    return [
        Case("copy host->openreg 64 MiB", "dev_dst.copy_(host_src)", "host_dst.copy_(host_src)", env, goal,
             bytes_moved=COPY_BYTES),
        Case("copy openreg->host 64 MiB", "host_dst.copy_(dev_src)", "host_dst.copy_(host_src)", env, goal,
             bytes_moved=COPY_BYTES),
        Case("cached empty(1024) + free", "torch.empty(1024, device=openreg)", "torch.empty(1024, device=cpu)", env,
             "time <= 1.0x CPU"),
        Case("1-element copy_ + synchronize", "a.copy_(b); torch.openreg.synchronize()", "a_cpu.copy_(b_cpu)", env,
             "(launch round trip)"),
    ]


def versions() -> dict[str, str]:
    import openreg_runtime

    return {"torch": torch.__version__, "openreg-runtime": openreg_runtime.__version__}


SUITE = Suite("runtime", "openreg runtime vs CPU", cases, versions)
