"""The eager suite: openreg-eager's kernels and small training steps against the CPU."""

import torch
from torch import nn

from .harness import Case, Suite, mlp


def _cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(32, 10),
    )


def _training(model: nn.Module, x: torch.Tensor, device: str) -> dict:
    torch.manual_seed(0)
    model = model.to(device)
    return {"model": model, "x": x.to(device), "y": torch.randint(0, 10, (x.shape[0],)).to(device),
            "opt": torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9),
            "loss_fn": nn.CrossEntropyLoss()}


STEP = "opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()"


def cases() -> list[Case]:
    small_a, small_b = torch.rand(1024), torch.rand(1024)
    big_a, big_b = torch.rand(16 << 20), torch.rand(16 << 20)
    m_a, m_b = torch.rand(1024, 1024), torch.rand(1024, 1024)
    pieces = [torch.rand(2) for _ in range(1000)]
    params, grads = ([torch.rand(1024).to(torch.bfloat16) for _ in range(100)] for _ in range(2))
    env = {
        "torch": torch,
        "sa": small_a.to("openreg"), "sb": small_b.to("openreg"), "sa_cpu": small_a, "sb_cpu": small_b,
        "ba": big_a.to("openreg"), "bb": big_b.to("openreg"), "ba_cpu": big_a, "bb_cpu": big_b,
        "ma": m_a.to("openreg"), "mb": m_b.to("openreg"), "ma_cpu": m_a, "mb_cpu": m_b,
        "pieces": [p.to("openreg") for p in pieces], "pieces_cpu": pieces,
        "ps": [p.to("openreg") for p in params], "gs": [g.to("openreg") for g in grads], "ps_cpu": params,
        "gs_cpu": grads,
    }
    sync = "; torch.openreg.synchronize()"
    cases = [
        Case("add 1k elements x1000, then sync", "for _ in range(1000): sa + sb\ntorch.openreg.synchronize()",
             "for _ in range(1000): sa_cpu + sb_cpu", env, "<= 1.5x"),
        Case("add 16M elements", "ba + bb" + sync, "ba_cpu + bb_cpu", env, "<= 1.1x"),
        # A list of thousands of tensors costs openreg per tensor, not per pair of them.
        Case("cat of 1000 tensors", "torch.cat(pieces)" + sync, "torch.cat(pieces_cpu)", env, "<= 3x"),
        Case("matmul 1024x1024", "ma @ mb" + sync, "ma_cpu @ mb_cpu", env, "<= 1.05x"),
        # A foreach SGD step on bfloat16 parameters: openreg reads lr in float, as CUDA does; the CPU rounds it.
        Case("foreach add_ of 100 bfloat16 tensors, alpha", "torch._foreach_add_(ps, gs, alpha=-0.01)" + sync,
             "torch._foreach_add_(ps_cpu, gs_cpu, alpha=-0.01)", env, "<= 6x"),
    ]
    for name, make, x in [("MLP", mlp, torch.rand(64, 256)), ("small CNN", _cnn, torch.rand(16, 3, 32, 32))]:
        dev, cpu = _training(make(), x, "openreg"), _training(make(), x, "cpu")
        step_env = {"torch": torch, **dev, **{f"{k}_cpu": v for k, v in cpu.items()}}
        cpu_step = STEP.replace("opt", "opt_cpu").replace("loss_fn", "loss_fn_cpu").replace("model", "model_cpu")
        cpu_step = cpu_step.replace("(x)", "(x_cpu)").replace(", y)", ", y_cpu)")
        cases.append(Case(f"{name} training step", STEP + sync, cpu_step, step_env, "<= 1.2x"))
    return cases


def versions() -> dict[str, str]:
    import openreg_eager

    return {"torch": torch.__version__, "openreg-eager": openreg_eager.__version__}


SUITE = Suite("eager", "openreg eager vs CPU", cases, versions)
