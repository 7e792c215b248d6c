"""Reference models that more than one package's tests train or compile on openreg beside the CPU."""

from __future__ import annotations

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4))

    def forward(self, x):
        return self.net(x)


class ConvBN(nn.Module):
    """Input (N, 3, H, W)."""

    def __init__(self):
        super().__init__()
        # No bias before a BatchNorm: its gradient is rounding noise, which Adam's normalisation turns into
        # full-size steps, so comparing it with the CPU's compares noise.
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1, bias=False),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 8, 3, padding=1, bias=False),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        return self.head(torch.flatten(self.features(x), 1))
