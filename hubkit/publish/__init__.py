"""Publishing a run: `push_run(PushRequest(...)) -> PushReport` (see `hubkit.publish.push` for the order).

Inside: builders (`repos.py`) give each repo's desired files from local data, `diff.py` compares them with
the remote read once (`remote.py`), `commit.py` makes at most one commit per repo. Needs the `hub` extra.
"""

from hubkit.publish.push import PushSession, push_run
from hubkit.publish.request import PushProgress, PushReport, PushRequest, RepoReport
from hubkit.publish.watch import watch_run

__all__ = [
    "PushProgress",
    "PushReport",
    "PushRequest",
    "PushSession",
    "RepoReport",
    "push_run",
    "watch_run",
]
