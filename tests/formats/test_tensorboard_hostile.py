"""Hostile TensorBoard event files in a run: read within bounds, bad records skipped or the reading stopped
with a note, never a traceback, a huge allocation or minutes of parsing."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest
from helpers import tfrecord
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary

from hubkit.formats.tensorboard import (
    MAX_POINTS,
    MAX_RECORDS,
    read_scalars,
    read_scalars_bytes,
    write_scalars,
)


def _scalar_event(step: int, value: float, tag: str = "train/reward") -> bytes:
    return Event(
        step=step, summary=Summary(value=[Summary.Value(tag=tag, simple_value=value)])
    ).SerializeToString()


@pytest.fixture
def written(tmp_path: Path) -> Path:
    """An event file written by TensorBoard's own writer: three reward scalars."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "tb"))
    for step in (1, 2, 3):
        writer.add_scalar("train/reward", step / 10, step)
    writer.close()
    return next((tmp_path / "tb").glob("events.out.tfevents.*"))


def test_tensorboards_own_file_is_read(written: Path) -> None:
    history = read_scalars(written)
    assert history.points == {
        "train/reward": [(1, pytest.approx(0.1)), (2, pytest.approx(0.2)), (3, pytest.approx(0.3))]
    }
    assert history.notes == ()


def test_written_scalars_are_what_tensorboards_own_writer_frames() -> None:
    from tensorboard.summary.writer.record_writer import RecordWriter  # its checksum is pure Python

    points = {"train/reward": [(1, 0.25), (2, 0.5)], "train/loss": [(1, 2.0)]}
    out = io.BytesIO()
    writer = RecordWriter(out)
    writer.write(Event(wall_time=0.0, file_version="brain.Event:2").SerializeToString())
    for step, values in ((1, (("train/loss", 2.0), ("train/reward", 0.25))), (2, (("train/reward", 0.5),))):
        summary = Summary(value=[Summary.Value(tag=tag, simple_value=value) for tag, value in values])
        writer.write(Event(wall_time=0.0, step=step, summary=summary).SerializeToString())
    assert write_scalars(points) == out.getvalue()
    assert read_scalars_bytes(out.getvalue(), "x").points == points


@pytest.mark.parametrize("where", ["length", "data"])
def test_a_record_failing_its_checksum_stops_the_file_with_a_note(written: Path, where: str) -> None:
    record = bytearray(tfrecord(_scalar_event(4, 0.4)))
    record[3 if where == "length" else 20] ^= 0x10  # one bit of the length's high bytes, or of the data
    with written.open("ab") as f:
        f.write(bytes(record))
        f.write(tfrecord(_scalar_event(5, 0.5)))
    history = read_scalars(written)
    assert [step for step, _ in history.points["train/reward"]] == [1, 2, 3]
    assert history.notes == (f"{written.name}: stopped at a record whose {where} fails its checksum",)


def test_a_record_declaring_2_62_bytes_stops_the_file_with_a_note(written: Path) -> None:
    with written.open("ab") as f:
        f.write(tfrecord(b"", length=2**62))
        f.write(tfrecord(_scalar_event(4, 9.9)))
    history = read_scalars(written)
    assert [step for step, _ in history.points["train/reward"]] == [1, 2, 3]
    assert "stopped at a record of 4611686018427387904 bytes" in history.notes[0]


def test_records_that_are_not_events_are_skipped_with_a_note(written: Path) -> None:
    with written.open("ab") as f:
        f.write(tfrecord(b"\xff" * 40))  # not a protocol buffer
        f.write(tfrecord(_scalar_event(4, 0.4)))
    history = read_scalars(written)
    assert [step for step, _ in history.points["train/reward"]] == [1, 2, 3, 4]
    assert history.notes == (f"{written.name}: skipped 1 records that are not TensorBoard events",)


def test_millions_of_scalars_are_read_within_bounds_and_thinned(tmp_path: Path) -> None:
    path = tmp_path / "events.out.tfevents.1.host"
    with path.open("wb") as f:
        f.write(b"".join(tfrecord(_scalar_event(step, step / 1e6)) for step in range(2_000_000)))
    started = time.monotonic()
    history = read_scalars(path)
    assert time.monotonic() - started < 30
    points = history.points["train/reward"]
    assert len(points) == MAX_POINTS and points[0][0] == 0 and points[-1][0] == MAX_RECORDS - 1
    assert history.notes == (f"{path.name}: read its first {MAX_RECORDS} records only",)
