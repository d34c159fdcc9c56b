"""What the Space can load: each run's checkpoints, as its adapter repo holds them.

A run's list starts as `space_config.json` gives it (the checkpoints the push published; none for a run's
own Space) and is read from the run's repo again when a visitor refreshes, picks the run, or asks for a
checkpoint not listed (pushed since). Only folders holding an `adapter_config.json` count (a half-uploaded
one does not). A request names a run by its name and a checkpoint by its value; both are checked here
before anything is loaded.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

from huggingface_hub import HfApi
from huggingface_hub.hf_api import RepoFolder

from config import (
    CHECKPOINT_RE,
    CHECKPOINTS_DIR,
    FINAL,
    AppConfig,
    RunConfig,
    checkpoint_label,
    checkpoint_step,
)
from render import RequestError


class Adapter(NamedTuple):
    """One checkpoint of one run: what a row of a batch loads beside the base model."""

    run: str  # the run's name
    checkpoint: str  # `checkpoints/global_step_N`, or FINAL

    @property
    def label(self) -> str:
        return checkpoint_label(self.checkpoint)


def list_repo_checkpoints(repo: str, revision: str | None) -> tuple[str, ...]:
    """The adapter repo's checkpoints: `checkpoints/global_step_N` by step, then FINAL when the root has one."""
    api = HfApi()
    root = {entry.path for entry in api.list_repo_tree(repo, revision=revision)}
    values: list[str] = []
    if CHECKPOINTS_DIR in root:
        folders = [
            entry.path
            for entry in api.list_repo_tree(repo, path_in_repo=CHECKPOINTS_DIR, revision=revision)
            if isinstance(entry, RepoFolder) and CHECKPOINT_RE.match(entry.path)
        ]
        configs = [f"{folder}/adapter_config.json" for folder in folders]
        found = {info.path.rsplit("/", 1)[0] for info in api.get_paths_info(repo, configs, revision=revision)}
        values = sorted((f for f in folders if f in found), key=lambda f: checkpoint_step(f) or 0)
    if "adapter_config.json" in root:
        values.append(FINAL)
    return tuple(values)


class Checkpoints:
    """Every run's checkpoints, as last listed (shared by the page's sessions).

    Args:
        config: the Space's configuration (its runs, with the checkpoints the push published).
    """

    def __init__(self, config: AppConfig) -> None:
        self.config = config
        self._known = {run.name: run.checkpoints for run in config.runs}
        self._lock = threading.Lock()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(run.name for run in self.config.runs)

    def run(self, name: str | None) -> RunConfig:
        """The run a request names ("" or None: the first).

        Raises:
            RequestError: no run of this Space has that name.
        """
        run = self.config.run((name or "").strip())
        if run is None:
            raise RequestError(
                f"Unknown run {str(name)[:80]!r}: this Space compares {', '.join(self.names)}."
            )
        return run

    def of(self, name: str | None) -> tuple[str, ...]:
        """The run's checkpoints as last listed."""
        with self._lock:
            return self._known[self.run(name).name]

    def list(self, name: str | None) -> tuple[str, ...]:
        """The run's checkpoints read from its adapter repo again."""
        run = self.run(name)
        values = list_repo_checkpoints(run.adapter_repo, run.adapter_revision)
        with self._lock:
            self._known[run.name] = values
        return values

    def validate(self, name: str | None, value: str | None) -> Adapter:
        """The checkpoint a request names, checked against the run's repo (listed again once if unknown).

        Args:
            name: the run's name ("" or None: the first run).
            value: `checkpoints/global_step_N`, or "" / None for the final adapter.

        Raises:
            RequestError: no such run, or the value is not a checkpoint of its adapter repo.
        """
        run = self.run(name)
        value = (value or FINAL).strip().strip("/")
        if value != FINAL and not CHECKPOINT_RE.match(value):
            raise RequestError(
                f"Unknown checkpoint {value[:80]!r}: give checkpoints/global_step_N, or nothing for the final adapter."
            )
        if value not in self.of(run.name):
            self.list(run.name)  # pushed since start-up?
        known = self.of(run.name)
        if value not in known:
            listed = ", ".join(checkpoint_label(v) for v in known) or "none"
            raise RequestError(f"{run.adapter_repo} has no {checkpoint_label(value)} (it has: {listed}).")
        return Adapter(run.name, value)

    def default(self, name: str | None) -> str | None:
        """The checkpoint the page offers first for the run: its final adapter, else its newest step."""
        values = self.of(name)
        return FINAL if FINAL in values else (values[-1] if values else None)
