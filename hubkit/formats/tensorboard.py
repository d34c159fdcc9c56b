"""TensorBoard event files (``events.out.tfevents.*``): their scalars, read record by record within bounds,
and written in the same framing.

An event file is a sequence of TFRecords (a little-endian 8-byte length, a 4-byte checksum of it, the data,
a 4-byte checksum of the data; each checksum a masked CRC-32C), each data an ``Event`` protocol buffer. The
records are framed here, checksummed with Google's `google_crc32c` (C), and each ``Event`` is coded by
TensorBoard's own generated class. TensorBoard's `RecordWriter` is not used: importing it imports
TensorBoard's TensorFlow stand-in and numpy (0.15 s), and its checksum is pure Python (0.09 s for the
250 KB of a 500-step run), both paid at every push. TensorBoard's `EventAccumulator` is not used either
because it trusts the file: a record declaring 2^62 bytes is allocated, a record it cannot decode raises,
and two million scalars take minutes and gigabytes before a card shows a few hundred points.

    scalars = read_scalars(path)      # ScalarHistory(points={"train/reward": [(1, 0.25), ...]}, notes=())

Bounds: a record of more than `MAX_RECORD_BYTES` (a scalar event is ~50 bytes) or a checksum that does not
match ends the file's reading with a note; a record that does not decode is skipped with a note; at most
`MAX_RECORDS` records and `MAX_BYTES` bytes are read; each tag keeps at most `MAX_POINTS` points, thinned evenly over the steps.

Written (`write_scalars`, the release's Training metrics tab), a file holds one event per step with every
scalar of that step, after TensorBoard's ``brain.Event:2`` header; every wall time is 0, so the same
scalars give the same bytes and the file says nothing of the machine or the hour it was written on.

`tensorboard` and `google_crc32c` come with ``hubkit[hub]`` (and ``hubkit[trackers]``); they are imported
only when an event file is read or written.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from hubkit.errors import FileFormatError

EVENT_FILE_PREFIX = "events.out.tfevents."
MAX_RECORD_BYTES = 1_000_000
MAX_RECORDS = 500_000
MAX_BYTES = 256_000_000
MAX_POINTS = 2_000
_HEADER = struct.Struct("<QI")  # the data's length, its checksum
_FOOTER = struct.Struct("<I")  # the data's checksum


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
        with path.open("rb") as f:
            return _read_scalars(f, path.name)
    except OSError as e:
        raise FileFormatError(f"{path.name}: cannot be read ({e.strerror})") from e


def read_scalars_bytes(data: bytes, name: str) -> ScalarHistory:
    """`read_scalars` of an event file's bytes; `name` labels its notes."""
    return _read_scalars(io.BytesIO(data), name)


def _read_scalars(f: BinaryIO, name: str) -> ScalarHistory:
    try:
        from google.protobuf.message import DecodeError
        from google_crc32c import value as crc32c
        from tensorboard.compat.proto.event_pb2 import Event
    except ImportError as e:
        raise FileFormatError(
            f"{name} is a TensorBoard event file: pip install 'hubkit[trackers]' to read its metrics"
        ) from e
    points: dict[str, list[tuple[int, float]]] = {}
    notes: list[str] = []
    skipped = read = 0
    for number in range(MAX_RECORDS + 1):
        header = f.read(_HEADER.size)
        if len(header) < _HEADER.size:
            break  # the end, or a record cut short while written (TensorBoard skips it too)
        if number == MAX_RECORDS or read > MAX_BYTES:
            notes.append(f"{name}: read its first {number} records only")
            break
        length, length_check = _HEADER.unpack(header)
        if _masked(crc32c(header[:8])) != length_check:
            notes.append(f"{name}: stopped at a record whose length fails its checksum")
            break
        if length > MAX_RECORD_BYTES:
            notes.append(f"{name}: stopped at a record of {length} bytes (more than a metric needs)")
            break
        data = f.read(length)
        footer = f.read(_FOOTER.size)
        read += _HEADER.size + length + _FOOTER.size
        if len(data) < length or len(footer) < _FOOTER.size:
            break
        if _masked(crc32c(data)) != _FOOTER.unpack(footer)[0]:
            notes.append(f"{name}: stopped at a record whose data fails its checksum")
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
    if skipped:
        notes.append(f"{name}: skipped {skipped} records that are not TensorBoard events")
    return ScalarHistory({tag: _thinned(series) for tag, series in points.items()}, tuple(notes))


def write_scalars(points: Mapping[str, Sequence[tuple[int, float]]]) -> bytes:
    """An event file holding `points` (tag → (step, value)): one event per step, its tags sorted, every
    wall time 0 (see the module docstring).

    Raises:
        FileFormatError: `tensorboard` or `google_crc32c` is not installed.
    """
    try:
        from google_crc32c import value as crc32c
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary
    except ImportError as e:
        raise FileFormatError(
            "writing TensorBoard event files needs tensorboard and google-crc32c: pip install 'hubkit[hub]'"
        ) from e
    by_step: dict[int, dict[str, float]] = {}
    for tag, series in points.items():
        for step, value in series:
            by_step.setdefault(step, {})[tag] = value
    events = [Event(wall_time=0.0, file_version="brain.Event:2")]
    for step in sorted(by_step):
        values = [Summary.Value(tag=tag, simple_value=by_step[step][tag]) for tag in sorted(by_step[step])]
        events.append(Event(wall_time=0.0, step=step, summary=Summary(value=values)))
    out = io.BytesIO()
    for event in events:
        data = event.SerializeToString()
        length = struct.pack("<Q", len(data))
        out.write(
            length + struct.pack("<I", _masked(crc32c(length))) + data + _FOOTER.pack(_masked(crc32c(data)))
        )
    return out.getvalue()


def _masked(crc: int) -> int:
    """TFRecord's masked CRC-32C: rotated right by 15 bits, plus a constant."""
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
