"""TensorBoard event files (``events.out.tfevents.*``): their scalars, read record by record within bounds.

An event file is a sequence of TFRecords (a little-endian 8-byte length, a 4-byte checksum of it, the data,
a 4-byte checksum of the data), each data an ``Event`` protocol buffer. The records are framed here and each
``Event`` is decoded by TensorBoard's own generated class; TensorBoard's `EventAccumulator` is not used
because it trusts the file: a record declaring 2^62 bytes is allocated, a record it cannot decode raises,
and two million scalars take minutes and gigabytes before a card shows a few hundred points.

    scalars = read_scalars(path)      # ScalarHistory(points={"train/reward": [(1, 0.25), ...]}, notes=())

Bounds: a record of more than `MAX_RECORD_BYTES` (a scalar event is ~50 bytes) or a checksum that does not
match ends the file's reading with a note; a record that does not decode is skipped with a note; at most
`MAX_RECORDS` records and `MAX_BYTES` bytes are read; each tag keeps at most `MAX_POINTS` points, thinned evenly over the steps.

`tensorboard` is an extra (``pip install 'hubkit[trackers]'``): it is imported only when a run has event
files to read.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from hubkit.errors import FileFormatError

EVENT_FILE_PREFIX = "events.out.tfevents."
MAX_RECORD_BYTES = 1_000_000
MAX_RECORDS = 500_000
MAX_BYTES = 256_000_000
MAX_POINTS = 2_000
_HEADER = struct.Struct("<QI")
_FOOTER_BYTES = 4


@dataclass(frozen=True)
class ScalarHistory:
    """The scalars of one event file: tag → (step, value) in step order, and what was skipped, in words."""

    points: dict[str, list[tuple[int, float]]]
    notes: tuple[str, ...] = ()


def _scalar(value: object) -> float | None:
    """A summary value's scalar: TF1's ``simple_value`` or a TF2 scalar tensor; None for other data."""
    if value.HasField("simple_value"):  # type: ignore[attr-defined]
        return float(value.simple_value)  # type: ignore[attr-defined]
    tensor = value.tensor if value.HasField("tensor") else None  # type: ignore[attr-defined]
    if tensor is None or tensor.tensor_shape.dim:
        return None
    for field in ("float_val", "double_val", "int_val", "int64_val"):
        values = getattr(tensor, field)
        if len(values) == 1:
            return float(values[0])
    if len(tensor.tensor_content) == 4:
        return float(struct.unpack("<f", tensor.tensor_content)[0])
    return None


def _thinned(points: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """At most `MAX_POINTS` points, evenly spaced over the list, the first and the last kept."""
    points.sort(key=lambda point: point[0])
    if len(points) <= MAX_POINTS:
        return points
    stride = (len(points) - 1) / (MAX_POINTS - 1)
    return [points[round(i * stride)] for i in range(MAX_POINTS)]


def read_scalars(path: Path) -> ScalarHistory:
    """Every scalar an event file holds, by tag, within the bounds above.

    Raises:
        FileFormatError: `tensorboard` is not installed, or the file cannot be opened.
    """
    try:
        from google.protobuf.message import DecodeError
        from tensorboard.compat.proto.event_pb2 import Event
    except ImportError as e:
        raise FileFormatError(
            f"{path.name} is a TensorBoard event file: pip install 'hubkit[trackers]' to read its metrics"
        ) from e
    points: dict[str, list[tuple[int, float]]] = {}
    notes: list[str] = []
    skipped = read = 0
    try:
        with path.open("rb") as f:
            for number in range(MAX_RECORDS + 1):
                header = f.read(_HEADER.size)
                if len(header) < _HEADER.size:
                    break  # the end, or a record cut short while written (TensorBoard skips it too)
                if number == MAX_RECORDS or read > MAX_BYTES:
                    notes.append(f"{path.name}: read its first {number} records only")
                    break
                length, _ = _HEADER.unpack(header)
                if length > MAX_RECORD_BYTES:
                    notes.append(
                        f"{path.name}: stopped at a record of {length} bytes (more than a metric needs)"
                    )
                    break
                data = f.read(length)
                read += _HEADER.size + length + _FOOTER_BYTES
                if len(data) < length or len(f.read(_FOOTER_BYTES)) < _FOOTER_BYTES:
                    break
                event = Event()
                try:
                    event.ParseFromString(data)
                except DecodeError:
                    skipped += 1
                    continue
                for value in event.summary.value:
                    scalar = _scalar(value)
                    if scalar is not None:
                        points.setdefault(value.tag, []).append((int(event.step), scalar))
    except OSError as e:
        raise FileFormatError(f"{path.name}: cannot be read ({e.strerror})") from e
    if skipped:
        notes.append(f"{path.name}: skipped {skipped} records that are not TensorBoard events")
    return ScalarHistory({tag: _thinned(series) for tag, series in points.items()}, tuple(notes))
