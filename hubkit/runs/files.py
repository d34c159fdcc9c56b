"""File helpers both framework readers share: tolerant JSON reads and numbered checkpoint folders."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hubkit.errors import FileFormatError
from hubkit.formats.json_file import read_json

# A trainer's state or verl's small JSON files: a log of 100,000 steps is ~50 MB; anything larger is not one.
MAX_STATE_BYTES = 64 * 1024 * 1024


def read_json_object(path: Path) -> dict[str, Any] | None:
    """A JSON object from `path`, or None when it is missing, half-written (a save in progress), or not a
    bounded, well-formed JSON object (a run directory is untrusted: nothing is read past the bound)."""
    try:
        data = read_json(path, max_bytes=MAX_STATE_BYTES)
    except (OSError, FileFormatError):
        return None
    return data if isinstance(data, dict) else None


def numbered_dirs(
    root: Path, pattern: re.Pattern[str], *, holding: str | None = None
) -> list[tuple[int, Path]]:
    """(step, path) of the folders of `root` whose name matches `pattern` (step in group 1), sorted by step;
    with `holding`, only those that contain that sub-folder (verl's ``actor``).

    `pattern`: e.g. ``^checkpoint-([0-9]{1,9})$`` (ASCII digits: `\\d` also matches other scripts' digits).
    """
    found = []
    if root.is_dir():
        for child in root.iterdir():
            match = pattern.match(child.name)
            if match and child.is_dir() and (holding is None or (child / holding).is_dir()):
                found.append((int(match.group(1)), child))
    return sorted(found)
