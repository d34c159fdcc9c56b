"""Finding a run directory from a run id or a path."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from hubkit.errors import RunNotFoundError

if TYPE_CHECKING:
    from hubkit.runs.manifest import Manifest

RUNS_DIR_ENV = "HUBKIT_RUNS_DIR"
DEFAULT_RUNS_DIR = "runs"


def default_runs_dir() -> Path:
    """Where runs live unless told otherwise: ``$HUBKIT_RUNS_DIR``, else ``runs/`` in the current directory."""
    return Path(os.environ.get(RUNS_DIR_ENV) or DEFAULT_RUNS_DIR)


def find_run_dir(
    run_id: str | None = None,
    runs_dir: str | Path | None = None,
    run_dir: str | Path | None = None,
    *,
    must_exist: bool = True,
) -> Path:
    """The directory of a run, as an absolute path: `run_dir` itself, else `run_id` looked up under `runs_dir`
    (default ``$HUBKIT_RUNS_DIR`` or ``runs/``); `must_exist` False is for a watcher started before training.

    Raises:
        RunNotFoundError: neither argument given, an invalid id, or no such directory (the message says
            where it looked).
    """
    if run_dir is not None:
        path = Path(run_dir).expanduser()
    elif not run_id:
        raise RunNotFoundError("no run given: pass --run-id RUN (looked up under runs/) or --run-dir PATH")
    elif "/" in run_id or "\\" in run_id or run_id in (".", ".."):
        raise RunNotFoundError(f"run id {run_id!r} must be a plain directory name; use --run-dir for a path")
    else:
        base = Path(runs_dir).expanduser() if runs_dir is not None else default_runs_dir()
        path = base / run_id
    if not must_exist:
        return path.absolute()
    if path.is_dir():
        return path.resolve()
    if run_dir is not None:
        raise RunNotFoundError(f"run directory {path} does not exist: check --run-dir")
    raise RunNotFoundError(
        f"no run {run_id!r} in {base.resolve()}: check the id, or set --runs-dir / ${RUNS_DIR_ENV}"
    )


def sweep_run_dirs(name: str, runs_dir: str | Path | None = None) -> list[Path]:
    """The runs under `runs_dir` (default as `find_run_dir`) whose manifest names the sweep `name`, by
    directory name; a folder whose manifest cannot be read is no run of it.

    Raises:
        RunNotFoundError: no run of that sweep there (the message says where it looked).
    """
    from hubkit.errors import ManifestError
    from hubkit.runs.manifest import MANIFEST_NAME, Manifest

    base = Path(runs_dir).expanduser() if runs_dir is not None else default_runs_dir()
    found = []
    for folder in sorted(base.iterdir()) if base.is_dir() else ():
        try:
            sweep = Manifest.load(folder).sweep if (folder / MANIFEST_NAME).is_file() else None
        except ManifestError:
            continue
        if sweep is not None and sweep.name == name:
            found.append(folder.resolve())
    if not found:
        raise RunNotFoundError(
            f"no run of the sweep {name!r} in {base.resolve()}: check the name, or --runs-dir"
        )
    return found


def base_differences(first: Manifest, other: Manifest) -> list[str]:
    """What two runs of a sweep must share to be compared, and do not: "base model", "base model revision"
    (`hubkit eval --sweep` answers with one base model, `hubkit push --sweep` compares them on one page)."""
    same = {
        "base model": (first.base_model, other.base_model),
        "base model revision": (first.base_model_revision, other.base_model_revision),
    }
    return [what for what, (a, b) in same.items() if a != b]
