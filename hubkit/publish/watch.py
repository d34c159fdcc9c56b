"""Pushing a run while it trains: a loop around `PushSession.push`.

Each look reads the run; when a new checkpoint is complete it pushes what is due (the merged model
only once training has finished), and when the run has finished it makes a last push and returns.

A watcher may start before the trainer: while the run folder does not exist yet, or holds no complete
checkpoint yet, it waits (saying so once), for at most `timeout` seconds without a new checkpoint.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from hubkit.errors import RunNotStartedError, WatchTimeoutError
from hubkit.publish.push import PushSession
from hubkit.publish.request import PushProgress, PushReport, PushRequest
from hubkit.runs import Run, load_run, select_checkpoints


def _look(request: PushRequest) -> tuple[Run | None, str | None]:
    """The run as it is now, or None and why it cannot be read yet (a trainer that has not saved)."""
    if not request.run_dir.is_dir():
        return None, "its folder does not exist yet"
    try:
        run = load_run(request.run_dir, base_model=request.base_model, steps=request.steps)
    except RunNotStartedError:
        return None, "it has no checkpoint yet"
    if not run.checkpoints and not run.finished:
        return run, "it has no complete checkpoint yet"
    return run, None


def watch_run(
    request: PushRequest,
    *,
    interval: float = 30.0,
    timeout: float | None = None,
    progress: PushProgress | None = None,
    on_report: Callable[[PushReport], None] | None = None,
) -> PushReport | None:
    """Push new checkpoints of `request.run_dir` as they appear, until the run finishes.

    Args:
        request: as for `push_run` (not a dry run); listed `steps` not saved yet are waited for. The run
            folder need not exist yet.
        timeout: give up after this many seconds without a new complete checkpoint (the first one
            included); None waits as long as the run takes.
        progress: the wait for a first checkpoint is one stage line.

    Returns:
        The last push's report, or None when the run finished without any checkpoint to push.

    Raises:
        WatchTimeoutError: `timeout` seconds passed without a new checkpoint.
        HubkitError: as `push_run`; also a listed step the finished run never saved.
    """
    if request.dry_run:
        raise ValueError("a watch pushes: it cannot be a dry run")
    progress = progress or PushProgress()
    last: PushReport | None = None
    pushed: tuple[tuple[int, ...], bool] | None = None
    said_waiting = False
    saved: tuple[int, ...] = ()
    since = time.monotonic()
    with PushSession(request) as session:
        while True:
            run, waiting = _look(request)
            if run is not None and tuple(c.step for c in run.checkpoints) != saved:
                saved, since = tuple(c.step for c in run.checkpoints), time.monotonic()
            if waiting is not None and not said_waiting:
                progress.stage(f"Waiting for the first checkpoint of {request.run_dir.name}: {waiting}")
                said_waiting = True
            if run is not None and waiting is None:
                done = run.finished and not run.pending
                due = select_checkpoints(run, request.steps, request.every, allow_missing=True)
                # A look that finds nothing new since the last push sends nothing (not even a remote read).
                if due and (saved, done) != pushed:
                    last = session.push(progress, run=run, may_merge=done, allow_missing_steps=True)
                    pushed = (saved, done)
                    if on_report is not None:
                        on_report(last)
                if done:
                    if request.steps:
                        select_checkpoints(run, request.steps, request.every)  # refuses steps never saved
                    return last
            if timeout is not None and time.monotonic() - since > timeout:
                raise WatchTimeoutError(
                    f"no new checkpoint of {request.run_dir.name} in {timeout:g} s (--watch-timeout): "
                    "check that training is running, or raise --watch-timeout"
                )
            time.sleep(interval)
