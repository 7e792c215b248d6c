"""torchvision models train on openreg as on the CPU (model_helpers).

- ResNet-18 (10 classes, random weights) on 32x32 images, batch 4: convolutions, BatchNorm (training and eval, its
  running statistics compared), max pooling, adaptive average pooling, residual additions; once more in
  channels_last. Strides are compared too.
- torchvision's detection ops (`torchvision.ops`: C++ custom operators with CPU and CUDA kernels only, which reach
  openreg through its fallback for operators it has no kernel of its own for), values and gradients.
- SSDlite, a detector, trained for two steps on images of two sizes with their boxes: the transform's resizing,
  anchors, box matching and encoding, hard negative mining (a sort), the classification and box losses.
"""

from __future__ import annotations

import pytest
import torch
from model_helpers import (
    RUNS,
    assert_like_cpu,
    check_classifier_training,
    compare_runs,
    forward_three,
    require,
    to,
    train_three,
)

torchvision = require("torchvision")

pytestmark = pytest.mark.torchvision


MEMORY_FORMATS = {"contiguous": torch.contiguous_format, "channels_last": torch.channels_last}


@pytest.mark.parametrize("memory_format", list(MEMORY_FORMATS))
def test_resnet18_trains_like_cpu(memory_format):
    """Also in channels_last (weights and images): gradients and outputs keep the CPU's strides."""
    torch.manual_seed(0)
    fmt = MEMORY_FORMATS[memory_format]
    model = torchvision.models.resnet18(num_classes=10).to(memory_format=fmt)
    check_classifier_training(f"torchvision resnet18 ({memory_format})", model, memory_format=fmt)


def _boxes(g: torch.Generator, n: int, size: float) -> torch.Tensor:
    corner = torch.rand(n, 2, generator=g) * size
    return torch.cat([corner, corner + 1 + torch.rand(n, 2, generator=g) * size / 2], dim=1)


def _ops_cases():
    ops = torchvision.ops
    g = torch.Generator().manual_seed(0)
    boxes, scores, classes = _boxes(g, 40, 40), torch.rand(40, generator=g), torch.randint(0, 3, (40,), generator=g)
    features = torch.randn(2, 8, 12, 12, generator=g)
    rois = torch.tensor([[0, 1.0, 1.5, 9.0, 11.0], [1, 2.0, 0.0, 11.5, 7.0], [0, 0.5, 3.5, 6.2, 10.0]])
    x, weight = torch.randn(1, 4, 8, 8, generator=g), torch.randn(6, 4, 3, 3, generator=g)
    offset, mask = torch.randn(1, 18, 6, 6, generator=g), torch.rand(1, 9, 6, 6, generator=g)
    return {
        "nms": (lambda b, s: ops.nms(b, s, 0.5), (boxes, scores)),
        "batched_nms": (lambda b, s, c: ops.batched_nms(b, s, c, 0.3), (boxes, scores, classes)),
        "roi_align": (lambda f, r: ops.roi_align(f, r, (4, 4), 0.5, 2, aligned=True), (features, rois)),
        "roi_align_adaptive": (lambda f, r: ops.roi_align(f, r, (3, 3), 1.0, -1), (features, rois)),
        "roi_pool": (lambda f, r: ops.roi_pool(f, r, (3, 3), 0.5), (features, rois)),
        "ps_roi_align": (lambda f, r: ops.ps_roi_align(f, r, (2, 2), 0.5, 2), (features, rois)),
        "ps_roi_pool": (lambda f, r: ops.ps_roi_pool(f, r, (2, 2), 0.5), (features, rois)),
        "deform_conv2d": (lambda x, o, w, m: ops.deform_conv2d(x, o, w, mask=m), (x, offset, weight, mask)),
    }


OPS = _ops_cases()


def _run_op(fn, args, device, dtype):
    """fn's result on `device` and the gradient of a weighted sum of it with respect to each floating-point
    argument (None for one it does not depend on, such as the boxes of the RoI ops; none for integer results)."""
    args = [to(a, device, dtype).requires_grad_(a.is_floating_point()) for a in args]
    out = fn(*args)
    if not out.is_floating_point():
        return out, []
    weights = torch.linspace(0.5, 1.5, out.numel(), dtype=out.dtype).reshape(out.shape).to(device)
    return out, torch.autograd.grad((out * weights).sum(), [a for a in args if a.requires_grad], allow_unused=True)


@pytest.mark.parametrize("op", list(OPS))
def test_detection_op_matches_cpu(op):
    fn, args = OPS[op]
    out = {key: _run_op(fn, args, device, dtype) for key, device, dtype in RUNS}
    (got, got_grads), (cpu, cpu_grads), (ref, ref_grads) = out["dev"], out["cpu"], out["ref"]
    assert got.device.type == "openreg", f"{op} returned a tensor on {got.device}"
    assert_like_cpu(f"torchvision.ops {op}", got, cpu, ref)
    assert [g is None for g in got_grads] == [c is None for c in cpu_grads], f"{op}: gradients for other arguments"
    for i, (g, c, r) in enumerate(zip(got_grads, cpu_grads, ref_grads, strict=True)):
        if c is not None:
            assert_like_cpu(f"torchvision.ops {op}: gradient of argument {i}", g, c, r)


def test_ssdlite_trains_like_cpu():
    """Two SGD steps of the summed losses, then the eval-mode class logits of a held-out batch."""
    torch.manual_seed(0)
    model = torchvision.models.detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None,
                                                                       num_classes=3)
    g = torch.Generator().manual_seed(1)

    def batch():
        images = [torch.rand(3, 96, 128, generator=g), torch.rand(3, 80, 112, generator=g)]
        targets = [{"boxes": _boxes(g, 2, 60), "labels": torch.tensor([1, 2])},
                   {"boxes": _boxes(g, 1, 50), "labels": torch.tensor([2])}]
        return images, targets

    runs = train_three(model, [batch(), batch()], lambda m, b: sum(m(*b).values()),
                       lambda params: torch.optim.SGD(params, lr=0.01, momentum=0.9))
    compare_runs("torchvision ssdlite320_mobilenet_v3_large", runs)
    logits = forward_three({k: r.model for k, r in runs.items()}, torch.rand(2, 3, 64, 64, generator=g),
                           lambda m, x: m.head(list(m.backbone(x).values()))["cls_logits"])
    assert_like_cpu("torchvision ssdlite320_mobilenet_v3_large: eval-mode class logits", logits["dev"], logits["cpu"],
                    logits["ref"])
