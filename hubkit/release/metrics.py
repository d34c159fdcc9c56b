"""A release's ``metrics.jsonl``, read once, line by line: at most `MAX_RECORDS` lines, kept in at most
`MAX_VALUES` values.

The lines are those `hubkit.runs.verl.read_metrics_jsonl` reads in a run (verl's ``{"step": N, "data":
{...}}`` or hubkit's neutral ``{"step": N, "<metric>": value}``), with its messages; a release's file is
published by whoever owns the repo, so it is streamed rather than split whole, and merged into one row
per step as it is read: a file of millions of records costs the values it keeps, never one object per
line.
"""

from __future__ import annotations

from pathlib import Path

from hubkit.errors import FileFormatError, ReleaseError
from hubkit.formats.json_file import parse_json, too_large
from hubkit.runs.model import Metrics, MetricsRow, is_number
from hubkit.runs.verl import MAX_METRICS_BYTES, MAX_STEP

# Two thousand points of each of a hundred metrics are 200,000 values, logged in a few thousand lines; a
# release holding five times that is not a training run's log (and each line costs a parse: ~5 µs).
MAX_VALUES = 1_000_000
MAX_RECORDS = 1_000_000


def read_release_metrics(path: Path, where: str) -> Metrics:
    """The metrics of a release's downloaded ``metrics.jsonl`` (`where` names the release in messages).

    A last line without its newline is skipped (as in a run: a write in progress when it was pushed).

    Raises:
        ReleaseError: larger than `MAX_METRICS_BYTES`, more than `MAX_RECORDS` lines or `MAX_VALUES`
            values, or a complete line that is not a JSON object with an integer ``step``.
    """
    name = f"metrics file {path.name}"
    rows: dict[int, dict[str, float]] = {}
    kept = 0
    with path.open("rb") as f:
        size = path.stat().st_size
        if size > MAX_METRICS_BYTES:
            raise ReleaseError(f"{where}: {too_large(name, size, MAX_METRICS_BYTES)}")
        for number, line in enumerate(f, start=1):
            if number > MAX_RECORDS:
                raise ReleaseError(
                    f"{where}: {name} holds more than {MAX_RECORDS} lines: not a training run's metrics"
                )
            if not line.endswith(b"\n") or not line.strip():
                continue  # blank, or the logger was still writing this line
            try:
                record = parse_json(line, f"{name} line {number}", max_depth=4)
            except FileFormatError as e:
                raise ReleaseError(f"{where}: {e}") from e
            step = record.get("step") if isinstance(record, dict) else None
            if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step <= MAX_STEP:
                raise ReleaseError(
                    f"{where}: {name} line {number} has no integer 'step' from 0 to {MAX_STEP}"
                )
            data = record["data"] if isinstance(record.get("data"), dict) else record
            kept += step not in rows  # a new step is a row to keep as well
            row = rows.setdefault(step, {})
            before = len(row)
            row.update((k, float(v)) for k, v in data.items() if k != "step" and is_number(v))
            kept += len(row) - before
            if kept > MAX_VALUES:
                raise ReleaseError(
                    f"{where}: {name} holds more than {MAX_VALUES} values by line {number}: not a "
                    "training run's metrics"
                )
    return Metrics(tuple(MetricsRow(step, rows[step]) for step in sorted(rows)))
