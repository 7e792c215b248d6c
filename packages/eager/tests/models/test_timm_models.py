"""timm models train on openreg as on the CPU (model_helpers.check_classifier_training).

Random weights (pretrained=False: nothing is downloaded), 10 classes, 32x32 images, batch 4:

- mobilenetv3_small_050: depthwise convolutions, BatchNorm, hard-swish, squeeze-and-excitation;
- a 2-block ViT (patch 8, width 64): patch embedding, class token, position embeddings, LayerNorm, GELU and
  timm's fused attention (scaled_dot_product_attention).
"""

from __future__ import annotations

import pytest
import torch
from model_helpers import check_classifier_training, require

timm = require("timm")

pytestmark = pytest.mark.timm

MODELS = {
    "mobilenetv3_small_050": dict(),
    "vit_tiny_patch16_224": dict(img_size=32, patch_size=8, embed_dim=64, depth=2, num_heads=4),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_timm_model_trains_like_cpu(name):
    torch.manual_seed(0)
    model = timm.create_model(name, pretrained=False, num_classes=10, **MODELS[name])
    check_classifier_training(f"timm {name}", model)
