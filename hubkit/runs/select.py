"""Choosing checkpoints of a run by step: all of them, listed steps, or every N-th (push, merge, eval)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NoReturn

from hubkit.errors import CheckpointError
from hubkit.runs.model import Checkpoint, Run


def select_checkpoints(
    run: Run,
    steps: Sequence[int] | None = None,
    every: int | None = None,
    *,
    allow_missing: bool = False,
    option: str = "--steps",
) -> tuple[Checkpoint, ...]:
    """The complete checkpoints chosen: all of them, the listed steps, or the steps that are multiples of `every`.

    By step; may be empty for a run still starting, with `every` (with `steps`: multiples among those).
    `allow_missing` leaves listed steps not complete yet out rather than refusing them (a run still
    training saves them later); `option`, the command-line option the steps came from, is named in messages.

    Raises:
        CheckpointError: a listed step is missing or still being written, or `every` is not positive.
    """
    if every is not None and every <= 0:
        raise CheckpointError(f"--every must be a positive number of steps, got {every}")
    complete = {c.step: c for c in run.checkpoints}
    if steps:
        missing = sorted(set(steps) - set(complete))
        if missing and not allow_missing:
            available = ", ".join(str(s) for s in complete) or "none"
            raise CheckpointError(
                f"run {run.manifest.run_id} has no complete checkpoint at step(s) "
                f"{', '.join(map(str, missing))} (complete: {available}): fix {option}"
            )
        chosen = [complete[s] for s in sorted(set(steps) & set(complete))]
    else:
        chosen = list(run.checkpoints)
    return tuple(c for c in chosen if every is None or c.step % every == 0)


def refuse_no_checkpoint(run: Run) -> NoReturn:
    """Refuse a run with nothing to publish, saying why each checkpoint folder is not complete.

    Raises:
        CheckpointError: always.
    """
    run_id = run.manifest.run_id
    if not run.pending:
        raise CheckpointError(
            f"run {run_id} has no complete checkpoint to publish yet: it has no checkpoint folder "
            "(wait for the first save, or check --run-dir)"
        )
    reasons = "; ".join(f"{c.path.name}: {c.incomplete_reason or 'not complete'}" for c in run.pending)
    raise CheckpointError(
        f"run {run_id} has no complete checkpoint to publish yet ({reasons}): wait for the save to finish, "
        "or publish a run whose saves completed"
    )
