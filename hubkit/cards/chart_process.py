"""A card's charts drawn by matplotlib in a child process, so that a push's interpreter stays free.

While a push builds its cards, its threads upload and hash, and each needs the interpreter back after every
send or read. matplotlib takes 0.35 s to import and 60-90 ms of interpreter time per chart; drawn in a
child process (`main`), the charts cost the push a process start and two pipes, and run on another core
(docs/design.md, "Charts").

The parent writes the charts as JSON on the child's standard input. The child draws every one, then writes
each PNG as its length (8 bytes, big-endian) and its bytes, in the same order, on its standard output, and
exits 0; on any error it exits non-zero with the traceback on its standard error.
"""

from __future__ import annotations

import dataclasses
import json
import os
import struct
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from hubkit.cards.plots import AccuracyChart, Chart, Curve, ModelPoint

TIMEOUT = 300  # seconds: a child that has not drawn its charts by then is ended (a card has at most six)
_LENGTH = struct.Struct(">Q")
# The directory holding the `hubkit` package: the child imports this hubkit, wherever it was found.
_HUBKIT_ROOT = str(Path(__file__).resolve().parents[2])


def draw_in_child(charts: Sequence[Chart | AccuracyChart]) -> Future[tuple[bytes, ...]]:
    """Start drawing `charts` in a new child process (spawned: a fork would copy the push's threads).

    Args:
        charts: what to draw.

    Returns:
        A future of the PNGs, in the order of `charts`; its error says why the child failed, with its
        traceback.
    """
    future: Future[tuple[bytes, ...]] = Future()
    if not charts:
        future.set_result(())
        return future
    payload = json.dumps([_encode(chart) for chart in charts]).encode()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [_HUBKIT_ROOT, os.environ.get("PYTHONPATH")])),
    }
    # -P: the working directory is not put on the child's path (a module there would shadow a library).
    process = subprocess.Popen(
        [sys.executable, "-P", "-c", f"from {__name__} import main; main()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hubkit-charts")
    future = pool.submit(_collect, process, payload, len(charts))
    pool.shutdown(wait=False)  # its thread ends when the child does
    return future


def _collect(process: subprocess.Popen[bytes], payload: bytes, count: int) -> tuple[bytes, ...]:
    """Hand the child its charts and read back `count` PNGs."""
    try:
        out, err = process.communicate(payload, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise RuntimeError(
            f"drawing the card's charts took more than {TIMEOUT} s; the child was ended"
        ) from None
    if process.returncode != 0:
        raise RuntimeError(
            f"drawing the card's charts failed (exit {process.returncode}):\n{err.decode(errors='replace')}"
        )
    images, offset = [], 0
    for _ in range(count):
        (size,) = _LENGTH.unpack_from(out, offset)
        offset += _LENGTH.size
        images.append(out[offset : offset + size])
        offset += size
    if offset != len(out) or any(len(image) == 0 for image in images):
        raise RuntimeError(f"the chart process wrote {len(out)} bytes that are not {count} PNGs")
    return tuple(images)


def _encode(chart: Chart | AccuracyChart) -> dict[str, Any]:
    return {"kind": "training" if isinstance(chart, Chart) else "accuracy", **dataclasses.asdict(chart)}


def _decode(item: dict[str, Any]) -> Chart | AccuracyChart:
    if item["kind"] == "training":
        return Chart(
            path=item["path"],
            title=item["title"],
            ylabel=item["ylabel"],
            curves=tuple(
                Curve(c["label"], tuple((step, value) for step, value in c["points"])) for c in item["curves"]
            ),
            marked_steps=tuple(item["marked_steps"]),
        )
    return AccuracyChart(
        title=item["title"],
        ylabel=item["ylabel"],
        points=tuple(ModelPoint(**point) for point in item["points"]),
        path=item["path"],
    )


def main() -> None:
    """The child: read the charts on standard input, draw them all, write the PNGs on standard output."""
    # Only the child imports matplotlib (0.35 s, measured); the parent imports this module to start it.
    from hubkit.cards import figures

    charts = [_decode(item) for item in json.load(sys.stdin)]
    images = [figures.png(chart) for chart in charts]
    out = sys.stdout.buffer
    for image in images:
        out.write(_LENGTH.pack(len(image)))
        out.write(image)
    out.flush()
