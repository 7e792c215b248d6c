"""Training loops on openreg match the same loops on the CPU.

Each test builds a model on the CPU, loads the same initial weights into a
second copy that moves to openreg, and trains both for a few steps on the same
inputs (generated on the CPU, then moved). Losses per step, final parameters
and buffers, optimizer state and an eval-mode forward must agree.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from openreg_runtime.testing.models import MLP, ConvBN

DEVICE = "openreg"
STEPS = 5
TOL = dict(atol=1e-4, rtol=1e-4)


class LayerNormNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32), nn.GELU(), nn.Linear(32, 4))

    def forward(self, x):
        return self.net(x)


class Recurrent(nn.Module):
    def __init__(self, cls):
        super().__init__()
        self.rnn = cls(8, 16, num_layers=2, batch_first=True)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.head(out[:, -1])


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(16, 4, batch_first=True)
        self.norm = nn.LayerNorm(16)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        out, _ = self.attn(x, x, x, need_weights=False)
        return self.head(self.norm(out + x).mean(1))


# name -> (constructor, input shape)
MODELS = {
    "linear": (MLP, (8, 16)),
    "conv_bn": (ConvBN, (4, 3, 8, 8)),
    "layernorm": (LayerNormNet, (8, 16)),
    "lstm": (lambda: Recurrent(nn.LSTM), (4, 5, 8)),
    "gru": (lambda: Recurrent(nn.GRU), (4, 5, 8)),
    "mha": (Attention, (4, 5, 16)),
}

OPTIMIZERS = {
    "sgd": (torch.optim.SGD, dict(lr=0.05, momentum=0.9, weight_decay=1e-4)),
    "adam": (torch.optim.Adam, dict(lr=1e-2)),
    "adamw": (torch.optim.AdamW, dict(lr=1e-2, weight_decay=1e-2)),
}

MODES = {
    "foreach_false": dict(foreach=False),
    "foreach_true": dict(foreach=True),
    "fused": dict(fused=True),
}


def _data(shape, n_classes=4, seed=1234):
    g = torch.Generator().manual_seed(seed)
    xs = [torch.randn(*shape, generator=g) for _ in range(STEPS)]
    ys = [torch.randint(0, n_classes, (shape[0],), generator=g) for _ in range(STEPS)]
    test_x = torch.randn(*shape, generator=g)
    return xs, ys, test_x


def _train(model, device, xs, ys, opt_cls, opt_kwargs):
    model = model.to(device)
    model.train()
    opt = opt_cls(model.parameters(), **opt_kwargs)
    losses = []
    for x, y in zip(xs, ys, strict=False):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x.to(device)), y.to(device))
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return model, opt, torch.stack(losses).cpu()


def _to_cpu_state(state_dict):
    return {k: v.detach().cpu() for k, v in state_dict.items()}


def _compare_runs(make, shape, opt_cls, opt_kwargs, cpu_opt_kwargs=None):
    torch.manual_seed(0)
    cpu_model = make()
    dev_model = make()
    dev_model.load_state_dict(cpu_model.state_dict())
    xs, ys, test_x = _data(shape)

    cpu_model, cpu_opt, cpu_losses = _train(cpu_model, "cpu", xs, ys, opt_cls, cpu_opt_kwargs or opt_kwargs)
    dev_model, dev_opt, dev_losses = _train(dev_model, DEVICE, xs, ys, opt_cls, opt_kwargs)

    for p in dev_model.parameters():
        assert p.device.type == DEVICE
        assert p.grad is not None and p.grad.device == p.device

    torch.testing.assert_close(dev_losses, cpu_losses, **TOL, msg=lambda m: f"losses per step differ: {m}")
    cpu_state, dev_state = cpu_model.state_dict(), _to_cpu_state(dev_model.state_dict())
    assert cpu_state.keys() == dev_state.keys()
    for k in cpu_state:
        torch.testing.assert_close(dev_state[k], cpu_state[k], **TOL, msg=lambda m, k=k: f"{k}: {m}")

    # The optimizer state (momentum buffers, Adam moments, steps) agrees too.
    cpu_opt_state = cpu_opt.state_dict()["state"]
    dev_opt_state = dev_opt.state_dict()["state"]
    assert cpu_opt_state.keys() == dev_opt_state.keys()
    for i in cpu_opt_state:
        for name, ref in cpu_opt_state[i].items():
            got = dev_opt_state[i][name]
            if isinstance(ref, torch.Tensor):
                torch.testing.assert_close(got.detach().cpu(), ref, **TOL, check_dtype=False,
                                           msg=lambda m, i=i, n=name: f"optimizer state {i}/{n}: {m}")
            else:
                assert got == ref

    # Inference with the trained weights (BatchNorm in eval mode uses its running stats).
    cpu_model.eval()
    dev_model.eval()
    with torch.no_grad():
        ref = cpu_model(test_x)
        got = dev_model(test_x.to(DEVICE))
    assert got.device.type == DEVICE
    torch.testing.assert_close(got.cpu(), ref, **TOL)


@pytest.mark.parametrize("model_name", list(MODELS))
def test_models_train_like_cpu(model_name):
    # SGD rather than Adam here: Adam divides by the gradient's running RMS, which turns
    # rounding noise in gradients that are zero in exact arithmetic (e.g. attention's key
    # bias) into full-size updates, and openreg may legitimately pick another algorithm
    # for an op than the CPU does (SDPA takes the math path on openreg).
    make, shape = MODELS[model_name]
    _compare_runs(make, shape, torch.optim.SGD, dict(lr=0.05, momentum=0.9, foreach=False))


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
def test_optimizers_train_like_cpu(opt_name, mode):
    opt_cls, kwargs = OPTIMIZERS[opt_name]
    kwargs = {**kwargs, **MODES[mode]}
    make, shape = MODELS["layernorm"]
    _compare_runs(make, shape, opt_cls, kwargs)


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("opt_name", ["sgd", "adamw"])
def test_optimizers_train_conv_bn_like_cpu(opt_name, mode):
    opt_cls, kwargs = OPTIMIZERS[opt_name]
    kwargs = {**kwargs, **MODES[mode]}
    make, shape = MODELS["conv_bn"]
    _compare_runs(make, shape, opt_cls, kwargs)


def test_adam_amsgrad_fused_like_cpu():
    make, shape = MODELS["linear"]
    _compare_runs(make, shape, torch.optim.Adam, dict(lr=1e-2, amsgrad=True, fused=True))


@pytest.mark.parametrize("lr_shape", [(), (1,), (1, 1)], ids=["0-dim", "1", "1x1"])
@pytest.mark.parametrize("lr_device", ["cpu", DEVICE])
@pytest.mark.parametrize("opt_cls", [torch.optim.Adam, torch.optim.AdamW, torch.optim.SGD, torch.optim.Adagrad],
                         ids=lambda cls: cls.__name__)
def test_fused_optimizers_take_a_tensor_lr_on_either_device(opt_cls, lr_device, lr_shape):
    """CUDA's fused kernels read a CPU learning rate of any shape on the host, as PyTorch's test_optim.py
    (test_tensor_lr) expects of every accelerator; a device one they read on the device."""
    make, shape = MODELS["linear"]
    _compare_runs(make, shape, opt_cls, dict(lr=torch.full(lr_shape, 1e-2, device=lr_device), fused=True),
                  dict(lr=torch.full(lr_shape, 1e-2), fused=True))


def _fused_adam_step(device, lr, **scaling):
    params, grads = [torch.ones(3, device=device)], [torch.full((3,), 4.0, device=device)]
    state = [torch.zeros(3, device=device)], [torch.zeros(3, device=device)], [], [torch.ones([], device=device)]
    torch._fused_adam_(params, grads, *state, lr=lr, beta1=0.9, beta2=0.99, weight_decay=0.0, eps=1e-8,
                       amsgrad=False, maximize=False, **scaling)
    return params[0]


@pytest.mark.parametrize("lr", ["float", "cpu", DEVICE])
@pytest.mark.parametrize("argument", ["grad_scale", "found_inf"])
def test_fused_optimizers_read_grad_scale_and_found_inf_on_the_device_only(argument, lr):
    """CUDA's fused kernels read grad_scale and found_inf on the device: with a device lr they refuse a CPU one
    ("grad_scale must be on the same GPU device as the params"), with a host lr they read host memory from the
    device. openreg refuses a CPU one (even 0-dim, which elementwise ops take) and updates nothing; on the device
    they unscale (or skip) the step as on the CPU."""
    lr_on = {"float": lambda d: 0.1, "cpu": lambda d: torch.tensor(0.1), DEVICE: lambda d: torch.tensor(0.1, device=d)}
    value = 2.0 if argument == "grad_scale" else 1.0
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        _fused_adam_step(DEVICE, lr_on[lr](DEVICE), **{argument: torch.tensor(value)})
    expected = _fused_adam_step("cpu", lr_on[lr]("cpu"), **{argument: torch.tensor(value)})
    torch.testing.assert_close(
        _fused_adam_step(DEVICE, lr_on[lr](DEVICE), **{argument: torch.tensor(value, device=DEVICE)}).cpu(), expected)


def test_sgd_nesterov_foreach_like_cpu():
    make, shape = MODELS["linear"]
    _compare_runs(make, shape, torch.optim.SGD, dict(lr=0.05, momentum=0.9, nesterov=True, foreach=True))


def test_training_on_second_device():
    """The same loop on openreg:1 keeps everything on openreg:1 and matches the CPU."""
    torch.manual_seed(0)
    make, shape = MODELS["layernorm"]
    cpu_model = make()
    dev_model = make()
    dev_model.load_state_dict(cpu_model.state_dict())
    xs, ys, _ = _data(shape)
    cpu_model, _, cpu_losses = _train(cpu_model, "cpu", xs, ys, torch.optim.AdamW, dict(lr=1e-2, foreach=True))
    dev_model, dev_opt, dev_losses = _train(dev_model, "openreg:1", xs, ys, torch.optim.AdamW,
                                            dict(lr=1e-2, foreach=True))
    for p in dev_model.parameters():
        assert p.device == torch.device("openreg:1")
        for v in dev_opt.state[p].values():
            if isinstance(v, torch.Tensor) and v.dim() > 0:
                assert v.device == torch.device("openreg:1")
    torch.testing.assert_close(dev_losses, cpu_losses, **TOL)
    for k, v in _to_cpu_state(dev_model.state_dict()).items():
        torch.testing.assert_close(v, cpu_model.state_dict()[k], **TOL)


def test_grad_clipping_and_accumulation_like_cpu():
    """clip_grad_norm_ (foreach) and gradient accumulation over micro-batches."""
    torch.manual_seed(0)
    make, shape = MODELS["linear"]
    cpu_model = make()
    dev_model = make()
    dev_model.load_state_dict(cpu_model.state_dict())
    dev_model.to(DEVICE)
    xs, ys, _ = _data(shape)
    results = {}
    for device, model in (("cpu", cpu_model), (DEVICE, dev_model)):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        norms = []
        for step in range(2):
            opt.zero_grad()
            for x, y in zip(xs[step * 2:step * 2 + 2], ys[step * 2:step * 2 + 2], strict=False):
                (F.cross_entropy(model(x.to(device)), y.to(device)) / 2).backward()
            norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5, foreach=True).detach())
            opt.step()
        results[device] = torch.stack(norms).cpu()
    torch.testing.assert_close(results[DEVICE], results["cpu"], **TOL)
    for k, v in _to_cpu_state(dev_model.state_dict()).items():
        torch.testing.assert_close(v, cpu_model.state_dict()[k], **TOL)
