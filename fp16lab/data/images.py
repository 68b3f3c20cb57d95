"""Learnable image classification data drawn on the fly: nothing is ever downloaded.

:class:`ShapesDataset` paints one of up to ten shapes or textures (disk, square, triangle,
ring, cross, diamond, horizontal stripes, vertical stripes, checkerboard, bar) per image at
a random position, size, small rotation and colour over a random background, then adds
Gaussian noise. The class is the shape, never the colour, so a network has to look at
geometry. Everything is deterministic from ``seed``; the images are generated once,
vectorised in torch, and kept as ``uint8`` (a 224×224 image costs 147 KiB), so the same
code serves a 32×32 quick-mode run on a laptop CPU and ResNet-sized inputs on a GPU.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

from fp16lab.checks import positive_float, positive_int
from fp16lab.device import resolve_device

__all__ = ["CLASS_NAMES", "ShapesDataset", "AugmentedShapes", "make_loaders", "small_cnn"]

CLASS_NAMES: tuple[str, ...] = (
    "disk",
    "square",
    "triangle",
    "ring",
    "cross",
    "diamond",
    "h-stripes",
    "v-stripes",
    "checker",
    "bar",
)

# Per-channel normalisation applied in __getitem__ / tensors(): roughly zero mean, unit std.
_MEAN = 0.5
_STD = 0.25


def _check_int(name: str, value: object, low: int, high: int | None = None) -> int:
    """``value`` as an int >= ``low`` (and <= ``high``): fp16lab.checks' rule, bools refused."""
    v = positive_int(name, value, minimum=low)
    if high is not None and v > high:
        raise ValueError(f"{name} must be an int in [{low}, {high}], got {value!r}")
    return v


_MAX_SEED = 2**64 - 1  # the largest seed torch.Generator.manual_seed takes


def _check_seed(seed: object, high: int = _MAX_SEED) -> int:
    return _check_int("seed", seed, 0, high)


def _check_noise(noise: object) -> float:
    value = positive_float("noise", noise, allow_zero=True)
    if value > 1:
        raise ValueError(f"noise must be a number in [0, 1], got {noise!r}")
    return value


def _masks(label: int, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Foreground mask (float, 0..1) of class ``label`` in local shape coordinates."""
    au, av = u.abs(), v.abs()
    rho = torch.sqrt(u * u + v * v)
    if label == 0:  # disk
        m = rho < 1.0
    elif label == 1:  # square
        m = torch.maximum(au, av) < 0.8
    elif label == 2:  # triangle, apex down
        m = (v < 0.7) & (v > -0.9 + 1.6 * au)
        m = m & (v > -0.9)
    elif label == 3:  # ring
        m = (rho < 1.0) & (rho > 0.6)
    elif label == 4:  # cross
        m = (torch.minimum(au, av) < 0.28) & (torch.maximum(au, av) < 1.0)
    elif label == 5:  # diamond
        m = (au + av) < 1.0
    elif label == 6:  # horizontal stripes in a square patch
        m = (torch.maximum(au, av) < 1.0) & (torch.sin(v * 3.0 * math.pi) > 0)
    elif label == 7:  # vertical stripes in a square patch
        m = (torch.maximum(au, av) < 1.0) & (torch.sin(u * 3.0 * math.pi) > 0)
    elif label == 8:  # checkerboard patch
        m = (torch.maximum(au, av) < 1.0) & ((torch.sin(u * 2.0 * math.pi) * torch.sin(v * 2.0 * math.pi)) > 0)
    else:  # 9: a long thin horizontal bar
        m = (au < 1.0) & (av < 0.22)
    return m.to(u.dtype)


def _generate(
    n: int, image_size: int, num_classes: int, seed: int, noise: float, chunk: int = 256
) -> tuple[torch.Tensor, torch.Tensor]:
    """Paint ``n`` images (uint8, N×3×H×W) and their balanced labels, deterministically."""
    g = torch.Generator().manual_seed(seed)
    labels = (torch.arange(n) % num_classes)[torch.randperm(n, generator=g)]
    images = torch.empty(n, 3, image_size, image_size, dtype=torch.uint8)
    axis = (torch.arange(image_size, dtype=torch.float32) + 0.5) / image_size * 2 - 1
    gy, gx = torch.meshgrid(axis, axis, indexing="ij")  # y down, x right, in [-1, 1]
    for start in range(0, n, chunk):
        stop = min(start + chunk, n)
        b = stop - start
        # Random placement, size, small rotation (|angle| < 25°: stripes stay told apart).
        cx = torch.empty(b, 1, 1).uniform_(-0.35, 0.35, generator=g)
        cy = torch.empty(b, 1, 1).uniform_(-0.35, 0.35, generator=g)
        size = torch.empty(b, 1, 1).uniform_(0.38, 0.6, generator=g)
        ang = torch.empty(b, 1, 1).uniform_(-0.44, 0.44, generator=g)
        bg = torch.rand(b, 3, 1, 1, generator=g)
        # Foreground: every channel 0.35..0.65 away from the background, so shapes stay visible.
        fg = (bg + 0.5 + torch.empty(b, 3, 1, 1).uniform_(-0.15, 0.15, generator=g)) % 1.0
        eps = torch.randn(b, 3, image_size, image_size, generator=g) * noise
        dx, dy = gx - cx, -(gy - cy)  # dy up
        cos, sin = torch.cos(ang), torch.sin(ang)
        u = (cos * dx + sin * dy) / size
        v = (-sin * dx + cos * dy) / size
        lab = labels[start:stop]
        mask = torch.zeros(b, image_size, image_size)
        for c in range(num_classes):
            idx = (lab == c).nonzero(as_tuple=True)[0]
            if idx.numel():
                mask[idx] = _masks(c, u[idx], v[idx])
        img = bg + (fg - bg) * mask.unsqueeze(1) + eps
        images[start:stop] = (img.clamp(0, 1) * 255).round().to(torch.uint8)
    return images, labels


class ShapesDataset(Dataset):
    """A learnable classification set of painted shapes with noise; deterministic from ``seed``.

    Defaults: ``image_size=32``, ``num_classes=10`` (at most 10, see :data:`CLASS_NAMES`),
    ``noise=0.15`` (std of the added Gaussian noise on the 0..1 scale), ``seed=0``.
    Items are ``(image, label)``: a float32 3×H×W tensor normalised to about zero mean and
    unit std, and an int64 class index. Two datasets with different seeds are disjoint
    draws of the same task (use them for train and validation).
    """

    def __init__(
        self, n: int, image_size: int = 32, num_classes: int = 10, *, seed: int = 0, noise: float = 0.15
    ) -> None:
        self.n = _check_int("n", n, 1)
        self.image_size = _check_int("image_size", image_size, 8)
        self.num_classes = _check_int("num_classes", num_classes, 2, len(CLASS_NAMES))
        self.seed = _check_seed(seed)
        self.noise = _check_noise(noise)
        self.images, self.labels = _generate(self.n, self.image_size, self.num_classes, self.seed, self.noise)

    @property
    def class_names(self) -> tuple[str, ...]:
        """Names of the classes in use, index = label."""
        return CLASS_NAMES[: self.num_classes]

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.images[index].float().div_(255).sub_(_MEAN).div_(_STD)
        return x, self.labels[index]

    def __getitems__(self, indices: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """A whole batch in a few vectorised ops (``DataLoader`` calls this when it exists)."""
        idx = torch.as_tensor(indices, dtype=torch.long)
        x = self.images[idx].float().div_(255).sub_(_MEAN).div_(_STD)
        return list(zip(x.unbind(0), self.labels[idx].unbind(0), strict=True))

    def tensors(self, device: "torch.device | str" = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
        """All images (normalised float32) and labels at once, on ``device`` (default cpu).

        Use for device-resident data, e.g. a benchmark that must not time the input pipeline.
        ``device`` must exist here (a clear ``ValueError`` otherwise).
        """
        device = resolve_device(device)
        x = self.images.to(device).float().div_(255).sub_(_MEAN).div_(_STD)
        return x, self.labels.to(device)

    def __repr__(self) -> str:
        return (
            f"ShapesDataset(n={self.n}, image_size={self.image_size}, num_classes={self.num_classes}, "
            f"seed={self.seed}, noise={self.noise})"
        )


class AugmentedShapes(Dataset):
    """:class:`ShapesDataset` images augmented per sample on the CPU, as a real image pipeline does.

    Why: an input pipeline that does work per sample (decode, crop, flip) is what ``num_workers``
    and ``pin_memory`` speed up. Each item: reflect-pad by ``pad`` pixels, crop a random
    ``image_size`` window, flip horizontally with probability 1/2, normalise (float32). It lives in
    the package so ``DataLoader`` workers started with *spawn* (Windows, macOS) can import it.
    Defaults: ``image_size=64``, ``num_classes=10``, ``seed=0`` (the images; the augmentation
    draws from torch's global generator, which the DataLoader seeds per worker), ``pad=4``.
    """

    def __init__(self, n: int, image_size: int = 64, num_classes: int = 10, *, seed: int = 0, pad: int = 4) -> None:
        size = _check_int("image_size", image_size, 8)
        self.pad = _check_int("pad", pad, 0, size - 1)  # reflect padding needs pad < the image size
        self.base = ShapesDataset(n, image_size, num_classes, seed=seed)
        self.images, self.labels = self.base.images, self.base.labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        size, p = self.base.image_size, self.pad
        img = self.images[index].float()
        if p:
            img = torch.nn.functional.pad(img.unsqueeze(0), (p, p, p, p), mode="reflect").squeeze(0)
        top, left = torch.randint(0, 2 * p + 1, (2,)).tolist()
        img = img[:, top : top + size, left : left + size]
        if torch.rand(()) < 0.5:
            img = img.flip(-1)
        return (img / 255 - _MEAN) / _STD, self.labels[index]

    def __repr__(self) -> str:
        return f"AugmentedShapes(n={len(self)}, image_size={self.base.image_size}, pad={self.pad}, seed={self.base.seed})"


def make_loaders(
    n_train: int = 4096,
    n_val: int = 1024,
    *,
    image_size: int = 32,
    num_classes: int = 10,
    batch_size: int = 64,
    seed: int = 0,
    noise: float = 0.15,
    num_workers: int = 0,
    pin_memory: bool | None = None,
) -> tuple[DataLoader, DataLoader]:
    """Train and validation ``DataLoader``s over two disjoint :class:`ShapesDataset` draws.

    Defaults: 4096 train / 1024 val images of 32×32, 10 classes, batch 64, ``seed=0``
    (train uses ``seed``, val ``seed + 1``). The train loader shuffles with its own
    ``torch.Generator`` seeded from ``seed`` and drops the last partial batch, so runs are
    repeatable; ``pin_memory`` defaults to True when a CUDA GPU is visible.
    """
    n_train, n_val = _check_int("n_train", n_train, 1), _check_int("n_val", n_val, 1)
    _check_int("image_size", image_size, 8)
    _check_int("num_classes", num_classes, 2, len(CLASS_NAMES))
    seed = _check_seed(seed, _MAX_SEED - 1)  # the validation set uses seed + 1
    _check_noise(noise)
    _check_int("batch_size", batch_size, 1)
    _check_int("num_workers", num_workers, 0)
    if pin_memory is None:
        pin_memory = torch.cuda.is_available()
    elif not isinstance(pin_memory, bool):
        raise ValueError(f"pin_memory must be True, False or None (pin when a CUDA GPU is visible), got {pin_memory!r}")
    if batch_size > n_train:
        raise ValueError(f"batch_size={batch_size!r} exceeds n_train={n_train!r}: no full batch")
    train = ShapesDataset(n_train, image_size, num_classes, seed=seed, noise=noise)
    val = ShapesDataset(n_val, image_size, num_classes, seed=seed + 1, noise=noise)
    gen = torch.Generator().manual_seed(seed)
    common: dict[str, Any] = dict(num_workers=num_workers, pin_memory=pin_memory, persistent_workers=num_workers > 0)
    train_loader = DataLoader(train, batch_size=batch_size, shuffle=True, drop_last=True, generator=gen, **common)
    val_loader = DataLoader(val, batch_size=batch_size, shuffle=False, **common)
    return train_loader, val_loader


def small_cnn(num_classes: int = 10, width: int = 32, in_channels: int = 3) -> torch.nn.Module:
    """A small CNN (3 conv blocks with BatchNorm, global pooling, linear head) for the shapes task.

    Defaults: ``num_classes=10``, ``width=32`` channels in the first block (doubling after),
    ``in_channels=3``. Channel counts are multiples of 8 so Tensor Cores can be used.
    """
    _check_int("num_classes", num_classes, 2)
    _check_int("width", width, 1)
    _check_int("in_channels", in_channels, 1)
    nn = torch.nn

    def block(cin: int, cout: int) -> nn.Sequential:
        return nn.Sequential(
            nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True), nn.MaxPool2d(2)
        )

    return nn.Sequential(
        block(in_channels, width),
        block(width, 2 * width),
        block(2 * width, 4 * width),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(4 * width, num_classes),
    )
