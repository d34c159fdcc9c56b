"""The answers a run sampled while it trained, as the framework saved them: TRL's ``log_completions`` tables
(``<output_dir>/completions/completions_{step:05d}.parquet``) and verl's rollout dumps
(``trainer.rollout_data_dir``: ``<dir>/<step>.jsonl``, the recipe's ``rollouts/``).

A run directory is untrusted: each file is bounded in size and read by its format's reader, at most
`MAX_ROWS_PER_STEP` rows are kept per step (the first ones), every text cut at `MAX_TEXT_CHARS`, and the
rewards kept are the numbers the framework logged beside each answer, by its names.

    completions = read_completions(run_dir, "trl")   # Completions(rows=(Completion(step=1, ...), ...))
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hubkit.errors import FileFormatError
from hubkit.formats.json_file import parse_jsonl, read_bounded
from hubkit.runs.model import is_number

MAX_ROWS_PER_STEP = 64
MAX_TEXT_CHARS = 20_000
MAX_FILE_BYTES = 256 * 1024 * 1024
_TRL_FILE_RE = re.compile(r"^completions_([0-9]{1,9})\.parquet$")
_VERL_FILE_RE = re.compile(r"^([0-9]{1,9})\.jsonl$")
# What each framework's row holds besides the rewards (TRL: prompt, completion; verl: input, output, gts).
_TEXT_COLUMNS = {"trl": ("prompt", "completion"), "verl": ("input", "output")}
_NOT_REWARDS = {"step", "prompt", "completion", "input", "output", "gts", "image", "images"}


@dataclass(frozen=True)
class Completion:
    """One sampled answer: its step, prompt and text, and the numbers logged beside it by name."""

    step: int
    prompt: str
    completion: str
    rewards: dict[str, float]


@dataclass(frozen=True)
class Completions:
    """Every kept answer by step, and what was left out, in words (a file unreadable, rows over the cap)."""

    rows: tuple[Completion, ...] = ()
    notes: tuple[str, ...] = ()


def _text(value: Any) -> str:
    """A prompt or an answer as text: a chat's messages one per line (``role: content``)."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, list | tuple):
        text = "\n".join(
            f"{m.get('role', '?')}: {m.get('content', '')}" if isinstance(m, dict) else str(m) for m in value
        )
    else:
        text = "" if value is None else str(value)
    return text[:MAX_TEXT_CHARS]


def _rewards(row: dict[str, Any]) -> dict[str, float]:
    return {str(k): float(v) for k, v in row.items() if k not in _NOT_REWARDS and is_number(v)}


def _trl_rows(path: Path) -> list[dict[str, Any]]:
    """The first rows of TRL's table (read in one batch of that size)."""
    import pyarrow.parquet as pq

    if path.stat().st_size > MAX_FILE_BYTES:
        raise FileFormatError(f"{path.name} is larger than {MAX_FILE_BYTES} bytes")
    first = next(pq.ParquetFile(path).iter_batches(batch_size=MAX_ROWS_PER_STEP), None)
    return first.to_pylist() if first is not None else []


def _verl_rows(path: Path) -> list[dict[str, Any]]:
    """The first lines of verl's dump."""
    lines = read_bounded(path, MAX_FILE_BYTES).split(b"\n")[:MAX_ROWS_PER_STEP]
    return [row for row in parse_jsonl(b"\n".join(lines), path.name) if isinstance(row, dict)]


def completion_files(run_dir: Path, framework: str, checkpoints_dir: str = ".") -> list[tuple[int, Path]]:
    """(step, file) of the run's saved completions, by step."""
    if framework == "trl":
        folders, pattern = [run_dir / checkpoints_dir / "completions", run_dir / "completions"], _TRL_FILE_RE
    else:
        folders, pattern = [run_dir / "rollouts"], _VERL_FILE_RE
    found: dict[int, Path] = {}
    for folder in folders:
        if folder.is_dir() and not folder.is_symlink():
            for child in folder.iterdir():
                match = pattern.match(child.name)
                if match and child.is_file() and not child.is_symlink():
                    found.setdefault(int(match.group(1)), child)
    return sorted(found.items())


def read_completions(run_dir: Path, framework: str, checkpoints_dir: str = ".") -> Completions:
    """The run's saved completions, within the bounds of the module docstring."""
    prompt_key, answer_key = _TEXT_COLUMNS.get(framework, _TEXT_COLUMNS["trl"])
    reader = _trl_rows if framework == "trl" else _verl_rows
    rows: list[Completion] = []
    notes: list[str] = []
    for step, path in completion_files(run_dir, framework, checkpoints_dir):
        try:
            raw = reader(path)
        except (OSError, ValueError, FileFormatError) as e:  # pyarrow's errors are ValueErrors (ArrowInvalid)
            notes.append(
                f"{path.name}: left out ({str(e).splitlines()[0][:120] if str(e) else type(e).__name__})"
            )
            continue
        rows += [
            Completion(step, _text(r.get(prompt_key)), _text(r.get(answer_key)), _rewards(r)) for r in raw
        ]
    return Completions(tuple(rows), tuple(notes))
