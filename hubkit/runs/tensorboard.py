"""Metrics from TensorBoard event files, for a run that logged its metrics nowhere else (verl's
``tensorboard`` logger, a TRL run whose trainer state holds no log history).

TRL's `TensorBoardCallback` prefixes its tags with ``train/`` and ``eval/``; the training ones are read
under the names the trainer state uses (``train/reward`` → ``reward``), so cards read them alike.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from hubkit.formats.tensorboard import EVENT_FILE_PREFIX, read_scalars
from hubkit.runs.model import Metrics, TrackerRun
from hubkit.runs.state import STATE_DIR

logger = logging.getLogger(__name__)

EVENT_FILES = "TensorBoard event files"
TENSORBOARD = TrackerRun("tensorboard", detail="event files in the run directory (not published)")
# Where event files are looked for under the run directory: TRL's runs/<time_host>/ is 2 folders deep,
# verl's tensorboard_log/<project>/<experiment>/ 3.
_MAX_DEPTH = 4
_TRAIN_PREFIX = "train/"
# Checkpoint folders hold no event files: not listed (a long run has hundreds).
_CHECKPOINT_RE = re.compile(r"^(checkpoint-[0-9]+|global_step_[0-9]+)$")


def event_files(run_dir: Path) -> list[Path]:
    """The run's TensorBoard event files, by path (``.hubkit/`` and checkpoint folders are not searched)."""
    found: list[Path] = []
    level = [run_dir]
    for _ in range(_MAX_DEPTH):
        below = []
        for folder in level:
            try:
                children = sorted(folder.iterdir())
            except OSError:
                continue
            for child in children:
                if child.name.startswith(EVENT_FILE_PREFIX) and child.is_file():
                    found.append(child)
                elif (
                    child.is_dir()
                    and not child.is_symlink()
                    and child.name != STATE_DIR.name
                    and not _CHECKPOINT_RE.match(child.name)
                ):
                    below.append(child)
        level = below
    return found


def read_event_metrics(files: list[Path]) -> Metrics:
    """The scalars of `files` as `Metrics` (later files win on a clash, as a resumed run's do); what the
    bounded reader skipped is logged (`hubkit.formats.tensorboard`)."""
    entries: list[tuple[int, dict[str, float]]] = []
    for path in files:
        history = read_scalars(path)
        for note in history.notes:
            logger.warning(note)
        for tag, points in history.points.items():
            name = tag.removeprefix(_TRAIN_PREFIX)
            entries.extend((step, {name: value}) for step, value in points)
    return Metrics.from_entries(entries)
