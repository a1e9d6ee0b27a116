"""What ingest sees of image and text columns, counted as Beam metrics while it reads them: each image's format
and size as read (before resizing), each text's length in words and characters. TFDV's statistics see only what
ingest stored (resized PNGs, texts as bytes), so these figures come from here; the summary and console show them.
"""

from __future__ import annotations

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

NAMESPACE = "dtfx.profile"


class ProfileRecorder:
    """Beam metrics of one DoFn: call `images` and `texts` per batch."""

    def __init__(self):
        self._metrics = beam.metrics.Metrics

    def images(self, name: str, originals: list[tuple[str, int, int]]) -> None:
        formats: dict[str, int] = {}
        for image_format, width, height in originals:
            formats[image_format] = formats.get(image_format, 0) + 1
            self._metrics.distribution(NAMESPACE, f"image_width:{name}").update(width)
            self._metrics.distribution(NAMESPACE, f"image_height:{name}").update(height)
        for image_format, count in formats.items():
            self._metrics.counter(NAMESPACE, f"image_format:{name}:{image_format}").inc(count)

    def texts(self, name: str, column: pa.Array) -> None:
        present = column.drop_null()
        if not len(present):
            return
        present = present.cast(pa.string())
        for what, lengths in (("words", pc.list_value_length(pc.utf8_split_whitespace(present))),
                              ("characters", pc.utf8_length(present))):
            values = lengths.to_numpy(zero_copy_only=False).astype(np.int64)
            # A distribution takes one value at a time: the batch's extremes give min and max, the counters the mean.
            distribution = self._metrics.distribution(NAMESPACE, f"text_{what}:{name}")
            distribution.update(int(values.min()))
            distribution.update(int(values.max()))
            self._metrics.counter(NAMESPACE, f"text_{what}_sum:{name}").inc(int(values.sum()))
        self._metrics.counter(NAMESPACE, f"text_rows:{name}").inc(len(present))


def read_profile(result) -> dict:
    """The profile from a finished pipeline's metrics:
    {"image": {name: {"formats": {png: n}, "width": [min, max], "height": [min, max]}},
     "text": {name: {"rows": n, "words": [min, mean, max], "characters": [min, mean, max]}}}."""
    query = result.metrics().query(beam.metrics.MetricsFilter().with_namespace(NAMESPACE))

    def value(metric):
        return metric.committed if metric.committed is not None else metric.attempted

    counters = {metric.key.metric.name: value(metric) for metric in query["counters"]}
    distributions = {metric.key.metric.name: value(metric) for metric in query["distributions"]}
    profile: dict = {"image": {}, "text": {}}
    for key, count in counters.items():
        kind, _, rest = key.partition(":")
        if kind == "image_format":
            name, _, image_format = rest.rpartition(":")
            entry = profile["image"].setdefault(name, {"formats": {}})
            entry["formats"][image_format] = count
            for side in ("width", "height"):
                found = distributions[f"image_{side}:{name}"]
                entry[side] = [found.min, found.max]
        elif kind == "text_rows" and count:
            entry = profile["text"].setdefault(rest, {"rows": count})
            for what in ("words", "characters"):
                found = distributions[f"text_{what}:{rest}"]
                entry[what] = [found.min, round(counters[f"text_{what}_sum:{rest}"] / count, 1), found.max]
    return {kind: entries for kind, entries in profile.items() if entries}

