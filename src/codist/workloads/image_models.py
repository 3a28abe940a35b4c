"""CIFAR ResNets of He et al. 2016 ("Deep Residual Learning for Image Recognition", Sec. 4.2).

Depth 6n+2: a 3x3 stem conv, three stages of n BasicBlocks each (widths w, 2w, 4w; the
second and third stages halve the resolution), global average pooling and a linear
classifier. Shortcuts are option A of the paper (identity; where the shape changes, the
input is subsampled by 2 and zero-padded in channels), which is what the paper used on
CIFAR and what gives its parameter counts (Table 6: ResNet-20 0.27M, ResNet-56 0.85M).
The input resolution is free (global pooling), so the same network runs on the 16x16
embedded images, on 32x32 CIFAR and on 28x28 Fashion-MNIST (one input channel: `in_channels`).

Plain torch.nn only, so the DeepSpeed engine (or anything else) can wrap it.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

#: the architectures the config accepts, name -> depth
CIFAR_RESNET_DEPTHS = {"resnet8": 8, "resnet20": 20, "resnet32": 32, "resnet56": 56}


class _ShortcutA(nn.Module):
    """Parameter-free shortcut (option A): stride-2 subsampling plus zero channel padding."""

    def __init__(self, in_channels: int, out_channels: int, stride: int):
        super().__init__()
        self.stride = stride
        self.pad = out_channels - in_channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride != 1:
            x = x[:, :, :: self.stride, :: self.stride]
        if self.pad:
            x = F.pad(x, (0, 0, 0, 0, self.pad // 2, self.pad - self.pad // 2))
        return x


def norm_layer(kind: str, channels: int) -> nn.Module:
    """BatchNorm (He et al.), GroupNorm (batch-independent: model averaging and exact
    data-parallel equivalence), or none."""
    if kind == "batch":
        return nn.BatchNorm2d(channels)
    if kind == "group":
        return nn.GroupNorm(min(8, channels), channels)
    if kind == "none":
        return nn.Identity()
    raise ValueError(f"norm {kind!r}: allowed 'batch', 'group', 'none'")


class BasicBlock(nn.Module):
    """Two 3x3 conv-norm layers with a residual connection (He et al. 2016, Fig. 2)."""

    def __init__(self, in_channels: int, out_channels: int, stride: int, norm: str = "batch"):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = norm_layer(norm, out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, stride=1, padding=1, bias=False)
        self.bn2 = norm_layer(norm, out_channels)
        if stride != 1 or in_channels != out_channels:
            self.shortcut: nn.Module = _ShortcutA(in_channels, out_channels, stride)
        else:
            self.shortcut = nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class CifarResNet(nn.Module):
    """ResNet-(6n+2) for small images; `width` is the first stage's channel count (16 in the paper)."""

    def __init__(self, depth: int, width: int = 16, num_classes: int = 10, in_channels: int = 3,
                 norm: str = "batch"):
        super().__init__()
        if depth < 8 or (depth - 2) % 6:
            raise ValueError(f"CIFAR ResNet depth must be 6n+2 with n >= 1 (8, 14, 20, 32, 56, ...), got {depth}")
        if width < 1 or num_classes < 1:
            raise ValueError(f"width and num_classes must be positive, got width={width}, num_classes={num_classes}")
        n = (depth - 2) // 6
        self.depth, self.width, self.num_classes = depth, width, num_classes
        self.conv = nn.Conv2d(in_channels, width, 3, stride=1, padding=1, bias=False)
        self.bn = norm_layer(norm, width)
        layers: list[nn.Module] = []
        channels = width
        for stage, out_channels in enumerate((width, 2 * width, 4 * width)):
            for block in range(n):
                stride = 2 if stage > 0 and block == 0 else 1
                layers.append(BasicBlock(channels, out_channels, stride, norm))
                channels = out_channels
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(channels, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn(self.conv(x)))
        x = self.layers(x)
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(x)


def build_cifar_resnet(depth: int, width: int = 16, num_classes: int = 10, norm: str = "batch",
                       in_channels: int = 3) -> CifarResNet:
    """A freshly initialised CIFAR ResNet; the caller seeds torch beforehand for reproducibility."""
    return CifarResNet(depth, width, num_classes, in_channels=in_channels, norm=norm)
