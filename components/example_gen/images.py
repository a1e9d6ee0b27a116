"""Image columns at ingest: each cell's image read (from a file or the cell's bytes), checked, converted to the
configured channels, resized to the configured size and stored as PNG bytes (a PNG of that size and mode as it is).

Resizing is bilinear with Pillow's antialiasing, the filter Transform's graph uses for images served at another
size (`tf.image.resize(antialias=True)`), so training and serving see the same kind of pixels (equal up to rounding).

PNG, because it is lossless and every TensorFlow build decodes it (Transform's `decode_image`);
compression level 1, because ingest is CPU-bound and the images are small.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import io
import os

import pyarrow as pa
from tfx.dsl.io import fileio

PNG_COMPRESSION = 1
THREADS = 4  # file reads, and Pillow's decoders and encoders, release the GIL


@dataclasses.dataclass(frozen=True)
class ImageColumn:
    """One features.image entry, as ingest reads it."""

    name: str
    source: str  # path | bytes
    height: int
    width: int
    channels: int  # 1 or 3

    @classmethod
    def from_dict(cls, feature: dict) -> ImageColumn:
        height, width = feature["size"]
        return cls(feature["name"], feature["source"], int(height), int(width), int(feature["channels"]))


class BadImage(ValueError):
    """An image cell that cannot be used; `row` is 0-based within the batch."""

    def __init__(self, column: str, row: int, reason: str):
        super().__init__(f"column {column!r}: {reason}")
        self.column, self.row, self.reason = column, row, reason


@dataclasses.dataclass(frozen=True)
class LoadedColumn:
    """An image column as ingest stores it, with what was wrong with each bad cell and what the good ones were."""

    images: pa.Array  # PNG bytes; null where the image is bad
    bad: list[BadImage]
    originals: list[tuple[str, int, int]]  # of each good image as read: (format, width, height)


def load_column(values: pa.Array, column: ImageColumn, base_dir: str) -> LoadedColumn:
    """The column as PNG bytes of the configured size and channels; see LoadedColumn."""
    cells = values.to_pylist()
    with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
        results = list(pool.map(lambda cell: _load_cell(cell, column, base_dir), cells))
    bad = [BadImage(column.name, row, result) for row, result in enumerate(results) if isinstance(result, str)]
    good = [None if isinstance(result, str) else result for result in results]
    return LoadedColumn(pa.array([result and result[0] for result in good], pa.binary()), bad,
                        [result[1] for result in good if result])


def _load_cell(cell, column: ImageColumn, base_dir: str) -> tuple[bytes, tuple[str, int, int]] | str:
    """(PNG bytes, (format, width, height) as read), or a string saying what is wrong."""
    if cell is None or cell == "" or cell == b"":
        return "no image (empty cell)"
    if column.source == "path":
        path = cell.decode() if isinstance(cell, bytes) else str(cell)
        if "://" not in path and not os.path.isabs(path):
            path = os.path.join(base_dir, path)
        try:
            with fileio.open(path, "rb") as handle:
                data = handle.read()
        except Exception as error:  # noqa: BLE001 - any reason a file cannot be read is a bad image here
            return f"cannot read image file {path} ({_reason(error)})"
        where = f"image file {path}"
    else:
        data = cell if isinstance(cell, bytes) else str(cell).encode()
        where = "the image bytes"
    return _normalised_png(data, column, where)


def _normalised_png(data: bytes, column: ImageColumn, where: str) -> tuple[bytes, tuple[str, int, int]] | str:
    from PIL import Image, UnidentifiedImageError

    mode = "L" if column.channels == 1 else "RGB"
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            original = ((image.format or "unknown").lower(), *image.size)
            if image.format == "PNG" and image.mode == mode and image.size == (column.width, column.height):
                return data, original  # as it is: decoding it gives the same pixels, and serving the same file agrees
            converted = image.convert(mode)
    except UnidentifiedImageError:
        return f"{where} is not an image (PNG, JPEG, GIF or BMP; {len(data)} bytes)"
    except Exception as error:  # noqa: BLE001 - truncated or corrupt data raises OSError, ValueError, SyntaxError
        return f"{where} is corrupt ({_reason(error)})"
    if converted.size != (column.width, column.height):
        converted = converted.resize((column.width, column.height), Image.BILINEAR)
    out = io.BytesIO()
    converted.save(out, format="PNG", compress_level=PNG_COMPRESSION)
    return out.getvalue(), original


def _reason(error: Exception) -> str:
    # tf.io.gfile's NotFoundError says "<path>; No such file or directory": the path is in the message already.
    if isinstance(error, FileNotFoundError) or type(error).__name__ == "NotFoundError":
        return "no such file"
    return getattr(error, "strerror", None) or str(error) or type(error).__name__
