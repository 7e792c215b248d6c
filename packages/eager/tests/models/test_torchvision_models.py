"""torchvision models train on openreg as on the CPU (model_helpers.check_classifier_training).

ResNet-18 (10 classes, random weights) on 32x32 images, batch 4: convolutions, BatchNorm (training and eval, its
running statistics compared), max pooling, adaptive average pooling, residual additions; once more in
channels_last. Strides are compared too.
"""

from __future__ import annotations

import pytest
import torch
from model_helpers import check_classifier_training, require

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
