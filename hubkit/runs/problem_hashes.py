"""The run's record of its training problems: the sha256 of every training problem's normalized text, in
the run directory (`TRAIN_PROBLEM_HASHES_NAME`, one hex digest per line, sorted).

Both recipes write it while preparing their data; it is published with the run, so anyone can check a
benchmark against it without seeing the training data (`hubkit.evaluate.problems.check_contamination`
does so before an evaluation starts). Importing this module needs only the standard library (the verl
recipe's environment imports it).
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from collections.abc import Iterable
from pathlib import Path

from hubkit.errors import EvalError
from hubkit.runs.state import write_atomically

TRAIN_PROBLEM_HASHES_NAME = "train_problems.sha256"
_HEX_DIGEST_RE = re.compile(r"^[0-9a-f]{64}$")
_WHITESPACE_RE = re.compile(r"\s+")


def normalize_problem_text(text: str) -> str:
    """A problem's text in the form that is hashed: Unicode NFKC, case-folded, whitespace runs as one space.

    So that a benchmark copy that differs only in line breaks, spacing, case or full-width digits still
    matches its training twin.
    """
    return _WHITESPACE_RE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def problem_hash(text: str) -> str:
    """The sha256 hex digest of a problem's normalized text (`normalize_problem_text`)."""
    return hashlib.sha256(normalize_problem_text(text).encode("utf-8")).hexdigest()


def write_train_problem_hashes(directory: str | os.PathLike[str], problems: Iterable[str]) -> Path:
    """Write `TRAIN_PROBLEM_HASHES_NAME` into `directory` (the run directory, or the data directory a recipe
    copies it from; created if needed), and return it: the distinct hashes of `problems` (the questions,
    without system prompt or answer), sorted."""
    path = Path(directory) / TRAIN_PROBLEM_HASHES_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    digests = sorted({problem_hash(text) for text in problems})
    write_atomically(path, "".join(d + "\n" for d in digests))
    return path


def read_train_problem_hashes(run_dir: str | os.PathLike[str]) -> frozenset[str] | None:
    """The training-problem hashes a run records, or None when it records none.

    Raises:
        EvalError: a line is not a sha256 hex digest.
    """
    path = Path(run_dir) / TRAIN_PROBLEM_HASHES_NAME
    try:
        lines = path.read_text(encoding="ascii").split()
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as e:
        raise EvalError(f"{TRAIN_PROBLEM_HASHES_NAME} is not ASCII: it must hold sha256 hex digests") from e
    bad = [line for line in lines if not _HEX_DIGEST_RE.match(line)]
    if bad:
        raise EvalError(
            f"{TRAIN_PROBLEM_HASHES_NAME} holds {len(bad)} line(s) that are not sha256 hex digests "
            f"(first: {bad[0][:70]!r}): rewrite it with hubkit.runs.problem_hashes.write_train_problem_hashes"
        )
    return frozenset(lines)
