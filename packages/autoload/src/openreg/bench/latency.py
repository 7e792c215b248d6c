"""The latency suite: round trips between the host and the device (a scalar read, a small op then a read, a
Python loop over a device tensor's elements, many small launches then a sync, a small training step), each on
a quiet machine and with every core busy, against the same work on the CPU."""

import dataclasses

import torch

from .harness import Case, Suite, mlp


def _pair(name: str, openreg: str, cpu: str, env: dict, quiet_goal: str, contended_goal: str) -> list[Case]:
    """The case on a quiet machine and with its cores contended."""
    quiet = Case(name, openreg, cpu, env, quiet_goal)
    return [quiet, dataclasses.replace(quiet, name=f"{name} (contended)", goal=contended_goal, contended=True)]


def cases() -> list[Case]:
    torch.manual_seed(0)
    model_cpu = mlp()
    x_cpu, y_cpu = torch.rand(64, 256), torch.randint(0, 10, (64,))
    env = {"torch": torch, "s_cpu": torch.tensor(1.5), "v_cpu": torch.randn(1000), "e_cpu": torch.randn(2000),
           "a_cpu": torch.zeros(100), "model_cpu": model_cpu, "x_cpu": x_cpu, "y_cpu": y_cpu,
           "loss_fn": torch.nn.CrossEntropyLoss()}
    env["model"] = mlp().to("openreg")
    env["model"].load_state_dict(model_cpu.state_dict())
    for name in ("s", "v", "e", "a", "x", "y"):
        env[name] = env[f"{name}_cpu"].to("openreg")
    env["opt"] = torch.optim.SGD(env["model"].parameters(), lr=0.01)
    env["opt_cpu"] = torch.optim.SGD(model_cpu.parameters(), lr=0.01)
    step = ("for _ in range(20):\n    opt.zero_grad(); loss = loss_fn(model(x), y); loss.backward(); opt.step()\n"
            "loss.item()")
    cpu_step = step.replace("opt", "opt_cpu").replace("model", "model_cpu").replace("(x), y)", "(x_cpu), y_cpu)")
    adds = "for _ in range(1000): a.add_(1)"
    return [
        *_pair(".item() of an idle device", "s.item()", "s_cpu.item()", env, "<= 3x", "<= 3x"),
        *_pair("a small op, then .item()", "(v >= 0).all().item()", "(v_cpu >= 0).all().item()", env,
               "<= 1.5x", "<= 2x"),
        *_pair("Python loop over 2000 elements", "sum(1 for t in e if t >= 0)", "sum(1 for t in e_cpu if t >= 0)",
               env, "<= 1.5x", "<= 2x"),
        *_pair("1000 small in-place adds, then sync", adds + "\ntorch.openreg.synchronize()",
               adds.replace("a.", "a_cpu."), env, "<= 1.3x", "<= 1.5x"),
        *_pair("MLP training, 20 steps", step, cpu_step, env, "<= 1.2x", "<= 1.2x"),
    ]


def versions() -> dict[str, str]:
    import openreg_eager

    return {"torch": torch.__version__, "openreg-eager": openreg_eager.__version__}


SUITE = Suite("latency", "openreg round trips vs CPU", cases, versions)
