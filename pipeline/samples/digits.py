"""An image classification set from scikit-learn's bundled 8x8 digits: coloured PNG files and a CSV of paths.

The 1,797 grey 8x8 digits are upscaled (bilinear) and tinted with a colour drawn per image, so
that the three channels differ as in a small colour-image set (CIFAR-10-like); the class stays
the shape of the digit.
"""

from __future__ import annotations

import csv
import os

import numpy as np

IMAGES_DIR = "images"
CSV_NAME = "digits.csv"


def write_digits(directory: str, size: int = 32, seed: int = 0) -> str:
    """Writes `images/NNNNN.png` and `digits.csv` (columns image, label) into `directory`; returns the CSV path."""
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits()
    random = np.random.default_rng(seed)
    images_dir = os.path.join(directory, IMAGES_DIR)
    os.makedirs(images_dir, exist_ok=True)
    rows = []
    for index, (pixels, label) in enumerate(zip(digits.images, digits.target, strict=True)):
        grey = Image.fromarray((pixels * (255 / 16)).astype(np.uint8)).resize((size, size), Image.BILINEAR)
        tint = random.uniform(0.35, 1.0, size=3)
        background = random.uniform(0.0, 0.25, size=3) * 255
        ink = np.asarray(grey, dtype=np.float32)[..., None] / 255
        rgb = background * (1 - ink) + 255 * tint * ink
        name = f"{index:05d}.png"
        Image.fromarray(rgb.clip(0, 255).astype(np.uint8), "RGB").save(os.path.join(images_dir, name))
        rows.append((f"{IMAGES_DIR}/{name}", str(int(label))))
    path = os.path.join(directory, CSV_NAME)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["image", "label"])
        writer.writerows(rows)
    return path
