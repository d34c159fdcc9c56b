"""Pushing a run while it trains: a loop around `PushSession.push`.

Each look reads the run; when a new checkpoint is complete it pushes what is due (the merged model
only once training has finished), and when the run has finished it makes a last push and returns.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from hubkit.publish.push import PushSession
from hubkit.publish.request import PushProgress, PushReport, PushRequest
from hubkit.runs import load_run, select_checkpoints


def watch_run(
    request: PushRequest,
    *,
    interval: float = 30.0,
    progress: PushProgress | None = None,
    on_report: Callable[[PushReport], None] | None = None,
) -> PushReport | None:
    """Push new checkpoints of `request.run_dir` as they appear, until the run finishes.

    Args:
        request: as for `push_run` (not a dry run); listed `steps` not saved yet are waited for.
        interval: seconds between looks at the run.
        progress: callbacks for progress display.
        on_report: called with each push's report.

    Returns:
        The last push's report, or None when the run finished without any checkpoint to push.

    Raises:
        HubkitError: as `push_run`; also a listed step the finished run never saved.
    """
    if request.dry_run:
        raise ValueError("a watch pushes: it cannot be a dry run")
    last: PushReport | None = None
    pushed: tuple[tuple[int, ...], bool] | None = None
    with PushSession(request) as session:
        while True:
            run = load_run(request.run_dir, base_model=request.base_model)
            done = run.finished and not run.pending
            saved = tuple(c.step for c in run.checkpoints)
            due = select_checkpoints(run, request.steps, request.every, allow_missing=True)
            # A look that finds nothing new since the last push sends nothing (not even a remote read).
            if due and (saved, done) != pushed:
                last = session.push(progress, may_merge=done, allow_missing_steps=True)
                pushed = (saved, done)
                if on_report is not None:
                    on_report(last)
            if done:
                if request.steps:
                    select_checkpoints(run, request.steps, request.every)  # refuses steps never saved
                return last
            time.sleep(interval)
