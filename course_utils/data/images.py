"""Images, offline: scikit-learn's 8x8 digits as tensors, and CIFAR-10 as an optional download."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import pickle
import tarfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch


class DigitsSplit(NamedTuple):
    """Images ``(N, 1, 8, 8)`` float32 in [0, 1] and labels ``(N,)`` int64."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor


def _read_digits() -> tuple[np.ndarray, np.ndarray]:
    """The digits as ``(1797, 8, 8)`` pixels (0..16) and ``(1797,)`` labels.

    Reads the CSV that scikit-learn ships, without importing scikit-learn (that import alone takes
    seconds); falls back to ``sklearn.datasets.load_digits`` if the file has moved.
    """
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("the digits ship with scikit-learn: install it with `pip install scikit-learn`")
    path = Path(spec.submodule_search_locations[0]) / "datasets" / "data" / "digits.csv.gz"
    if path.exists():
        table = np.loadtxt(path, delimiter=",")  # (1797, 65): 64 pixels, then the label
        return table[:, :-1].reshape(-1, 8, 8), table[:, -1].astype(np.int64)
    from sklearn.datasets import load_digits

    digits = load_digits()
    return digits.images, digits.target.astype(np.int64)


def load_digits_tensors(seed: int = 0, test_fraction: float = 0.2, train_fraction: float = 1.0) -> DigitsSplit:
    """scikit-learn's handwritten digits (1,797 images of 8x8 pixels, 10 classes), split stratified.

    The test set depends only on ``seed`` and ``test_fraction``; ``train_fraction`` keeps that share
    of the training set (again stratified, and nested: a smaller fraction is a subset of a larger one
    under the same seed), for data-efficiency curves.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    if not 0.0 < train_fraction <= 1.0:
        raise ValueError(f"train_fraction must be in (0, 1], got {train_fraction}")
    images, labels = _read_digits()
    images = (images / 16.0).astype(np.float32)  # pixel values are 0..16
    rng = np.random.default_rng(seed)
    train_idx, test_idx = [], []
    keep_idx = []
    for label in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == label))
        n_test = int(round(test_fraction * len(members)))
        test_idx.append(members[:n_test])
        rest = members[n_test:]
        train_idx.append(rest)
        keep_idx.append(rest[: max(1, int(round(train_fraction * len(rest))))])
    test = np.sort(np.concatenate(test_idx))
    train = np.sort(np.concatenate(keep_idx))

    def as_tensors(idx):
        return torch.from_numpy(images[idx]).unsqueeze(1), torch.from_numpy(labels[idx])

    return DigitsSplit(*as_tensors(train), *as_tensors(test))


CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
CIFAR10_MD5 = "c58f30108f718f92721af3b95e74349a"
CIFAR10_FILE = "cifar-10-python.tar.gz"
CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")


def _md5(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()


def _download(url: str, target: Path) -> None:
    from tqdm.auto import tqdm

    partial = target.with_suffix(target.suffix + ".part")
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            total = int(response.headers.get("Content-Length", 0)) or None
            with (
                open(partial, "wb") as out,
                tqdm(total=total, unit="B", unit_scale=True, desc=f"downloading {target.name}") as bar,
            ):
                for block in iter(lambda: response.read(1 << 16), b""):
                    out.write(block)
                    bar.update(len(block))
    except (urllib.error.URLError, OSError, TimeoutError) as error:
        partial.unlink(missing_ok=True)
        raise RuntimeError(
            f"could not download CIFAR-10 from {url} ({error}). Check the internet connection, or download "
            f"the file by hand and put it at {target}"
        ) from error
    partial.replace(target)


def load_cifar10(
    root: str | os.PathLike = "data", download: bool = False, train: bool = True, verify: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """CIFAR-10 as ``(images (N, 3, 32, 32) float32 in [0, 1], labels (N,) int64)``.

    Reads ``root/cifar-10-python.tar.gz`` (163 MiB). With ``download=True`` a missing file is fetched
    from the authors' site with a progress bar; the MD5 checksum is checked before use, so a broken or
    partial download is reported instead of silently giving wrong data. Only the optional CIFAR-10
    exercise uses this: everything else in the course runs on :func:`load_digits_tensors`, offline.
    """
    path = Path(root) / CIFAR10_FILE
    if not path.exists():
        if not download:
            raise FileNotFoundError(
                f"CIFAR-10 archive not found at {path}. Call load_cifar10({str(root)!r}, download=True) "
                f"on a machine with internet access, or download {CIFAR10_URL} and put it there."
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        _download(CIFAR10_URL, path)
    if verify:
        actual = _md5(path)
        if actual != CIFAR10_MD5:
            raise RuntimeError(
                f"{path} has MD5 {actual}, expected {CIFAR10_MD5}: the file is corrupt or incomplete. "
                "Delete it and download again."
            )
    names = [f"data_batch_{i}" for i in range(1, 6)] if train else ["test_batch"]
    images, labels = [], []
    with tarfile.open(path, "r:gz") as archive:
        for name in names:
            member = archive.extractfile(f"cifar-10-batches-py/{name}")
            if member is None:
                raise RuntimeError(f"{path} does not contain cifar-10-batches-py/{name}")
            batch = pickle.load(member, encoding="bytes")
            images.append(np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32))
            labels.append(np.asarray(batch[b"labels"], dtype=np.int64))
    x = torch.from_numpy(np.concatenate(images)).float() / 255.0
    return x, torch.from_numpy(np.concatenate(labels))
