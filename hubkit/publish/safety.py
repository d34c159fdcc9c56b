"""Refuse a plan that would publish something that must never leave the machine.

Two checks, both run when the plan is built (before any connection is opened):

- by name: optimizer, scheduler and RNG state, `training_args.bin`, every pickle-based format, and
  hubkit's own `.hubkit/` records of the run;
- by content: every text file is scanned for the run's absolute path, paths under the home
  directory, and strings that look like Hugging Face tokens (or the token in use).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from hubkit.errors import UnsafeFileError
from hubkit.publish.plan import PlannedFile

# Pickle-based or training-state files: loading them executes code, and they are useless to users.
_FORBIDDEN_SUFFIXES = (".pt", ".pth", ".bin", ".pkl", ".pickle", ".ckpt", ".npy", ".joblib")
_FORBIDDEN_NAME_PARTS = ("optimizer", "scheduler", "rng_state", "training_args", "extra_state")
# What hubkit keeps in a run directory about the run (push records, adapter checks): local only.
_HUBKIT_STATE_DIR = ".hubkit"
# User access tokens are "hf_" + 34 letters/digits; allow some slack for other token kinds.
_TOKEN_RE = re.compile(rb"hf_[A-Za-z0-9]{30,}")
_TEXT_SUFFIXES = (".json", ".jsonl", ".md", ".txt", ".jinja", ".yaml", ".yml", ".py", ".csv")
_BINARY_SUFFIXES = (".safetensors", ".gguf", ".png", ".jpg", ".parquet")


def check_file_names(files: Iterable[PlannedFile]) -> None:
    """Refuse training state and pickles by file name.

    Raises:
        UnsafeFileError: naming the first such file.
    """
    for planned in files:
        if _HUBKIT_STATE_DIR in PurePosixPath(planned.path_in_repo).parts:
            raise UnsafeFileError(
                f"refusing to publish {planned.path_in_repo}: {_HUBKIT_STATE_DIR}/ holds hubkit's own records "
                "of a run (pushes, adapter checks) and is never published"
            )
        name = PurePosixPath(planned.path_in_repo).name.lower()
        if name.endswith(_FORBIDDEN_SUFFIXES) or any(part in name for part in _FORBIDDEN_NAME_PARTS):
            raise UnsafeFileError(
                f"refusing to publish {planned.path_in_repo}: optimizer/RNG/scheduler state, training "
                "arguments and pickles are never published (only safetensors and text files are)"
            )


def _is_text(planned: PlannedFile) -> bool:
    name = planned.path_in_repo.lower()
    if name.endswith(_TEXT_SUFFIXES):
        return True
    if name.endswith(_BINARY_SUFFIXES):
        return False
    # Unknown kind: treat it as text unless its first bytes hold a NUL (the Hub's own heuristic).
    return b"\0" not in planned.read_head(8192)


def check_file_contents(
    files: Iterable[PlannedFile], run_dir: Path, home_dir: Path, token: str | None
) -> None:
    """Scan every text file for local paths and tokens.

    Args:
        files: the planned files.
        run_dir: the run directory; its absolute path must not appear at all.
        home_dir: the user's home; a path under it must not appear (the bare directory name may: it
            is an ordinary token in some vocabularies).
        token: the token in use, if any; never echoed in the error.

    Raises:
        UnsafeFileError: naming the file and what kind of string it holds.
    """
    run_paths = {str(run_dir), str(run_dir.resolve())}
    needles = [p.encode() for p in run_paths]
    if str(home_dir) not in ("", "/"):
        needles.append((str(home_dir).rstrip("/") + "/").encode())
    for planned in files:
        if not _is_text(planned):
            continue
        data = planned.read_bytes()
        if (token and len(token) >= 16 and token.encode() in data) or _TOKEN_RE.search(data):
            raise UnsafeFileError(
                f"refusing to publish {planned.path_in_repo}: it contains a Hugging Face token; remove it and "
                "push again"
            )
        for needle in needles:
            if needle in data:
                raise UnsafeFileError(
                    f"refusing to publish {planned.path_in_repo}: it contains a local path of this machine; "
                    "write Hub ids or relative paths instead and push again"
                )


def check_planned_files(files: Iterable[PlannedFile], run_dir: Path, token: str | None) -> None:
    """Both checks of this module, for files a push is about to plan: by name, then by content (local
    paths of the run and the home directory, tokens).

    Raises:
        UnsafeFileError: naming the first refused file.
    """
    files = tuple(files)
    check_file_names(files)
    check_file_contents(files, run_dir, Path.home(), token)
