"""Every commit of a push, in its order: each repo of the plan in commits of a bounded size
(`hubkit.publish.split`), then each checkpoint branch, newest first, each recorded in the run directory.

Before the first byte, the push states what the Hub does not hold yet (`hubkit.publish.storage`). A repo
whose changes take more than one commit has all of its objects sent first, in one call that asks the Hub
about every file (`upload_all`): a storage quota's refusal then comes before its first commit, and the repo
is left as it was; a repo is either unchanged or fully committed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from huggingface_hub import HfApi

from hubkit.errors import RateLimitedError
from hubkit.hub.failures import hub_errors
from hubkit.hub.remote import RemoteRepo
from hubkit.hub.retry import DEFAULT_RETRY, RetryPolicy, clock
from hubkit.publish.commit import UploadsAhead, commit_repo, upload_all
from hubkit.publish.create import head_to_commit_on
from hubkit.publish.describe import describe_storage
from hubkit.publish.diff import RepoDiff, diff_repo
from hubkit.publish.plan import PushPlan
from hubkit.publish.push_record import save_record
from hubkit.publish.request import PushProgress, PushRequest, RepoReport
from hubkit.publish.split import after, split_diff
from hubkit.publish.storage import held_objects, storage_by_repo


@dataclass(frozen=True)
class Committed:
    """What `commit_plan` made: one report per repo (its last commit; files and bytes of all of them), one
    per branch (a branch's `steps` are its step, whatever of it changed), and its notes."""

    repos: tuple[RepoReport, ...]
    branches: tuple[RepoReport, ...]
    notes: tuple[str, ...]


def commit_plan(
    api: HfApi,
    plan: PushPlan,
    remotes: dict[str, RemoteRepo],
    branches: dict[str, RemoteRepo],
    request: PushRequest,
    progress: PushProgress,
    ahead: UploadsAhead | None = None,
    retry: RetryPolicy = DEFAULT_RETRY,
) -> Committed:
    """Each repo of the plan, in its order, in commits of at most `request.max_files_per_commit` files,
    then one commit per checkpoint branch, newest first, each recorded in the run directory. The branches
    come last: their weights are the main branch's LFS objects, on the Hub by then, so a branch's commit
    sends none of them again; and every checkpoint is loadable by subfolder from main before any branch is
    made.

    Args:
        remotes: each repo's state before the push; `branches`: each checkpoint branch's, by name.
        request: the push's (its run directory records the push; its commits' size).
        progress: told what the Hub does not hold yet and the bytes to upload, then each file uploaded.
        ahead: uploads started before the plan was whole (the adapter repo's new weights, diffed then).
        retry: how transient failures and the Hub's rate limits are met (its `max_wait`).

    Raises:
        RateLimitedError: the Hub's rate limit resets later than the push may wait; the line names the
            commits left and when to run the push again (it makes only those).
        HubkitError: as `commit_repo`.
    """
    known = {ahead.repo_id: ahead.diff} if ahead is not None else {}
    diffs = [diff_repo(repo, remotes[repo.repo_id], known.get(repo.repo_id)) for repo in plan.repos]
    branch_diffs = [diff_repo(branch, branches[branch.revision]) for branch in plan.branches]
    notes = tuple(
        f"{diff.plan.repo_id} already exists and is public: --private only applies to new repos "
        "(change the visibility in the repo's settings)"
        for diff in diffs
        if diff.plan.private and diff.remote.private is False
    )
    held = {r: held_objects([remote]) for r, remote in remotes.items()}
    for branch in branches.values():
        held.setdefault(branch.repo_id, set()).update(held_objects([branch]))
    progress.stage(describe_storage(storage_by_repo(plan, held)))
    progress.upload_started(sum(d.upload_size for d in diffs))
    # The branches newest first: a push the Hub's rate limit stops has published the newest checkpoints.
    newest_first = sorted(branch_diffs, key=lambda d: d.plan.steps, reverse=True)
    every = [*diffs, *newest_first]
    parts = [split_diff(d, request.max_files_per_commit) for d in every]
    commits = sum(len(p) for p, d in zip(parts, every, strict=True) if not d.is_empty)
    first_commits: dict[str, str] = {}
    reports = []
    for index, (diff, split) in enumerate(zip(every, parts, strict=True)):
        on_uploaded = (lambda f: progress.uploaded(f.size)) if diff.plan.revision == "main" else None
        made: list[RepoReport] = []
        try:
            uploaded = _before_parts(api, diff, retry, first_commits) if len(split) > 1 else None
            head = uploaded[1] if uploaded is not None else None
            for part in split:
                report = commit_repo(
                    api,
                    after(part, head),
                    on_uploaded=on_uploaded,
                    retry=retry,
                    ahead=ahead,
                    first_commits=first_commits,
                    uploaded=uploaded[0] if uploaded is not None else frozenset(),
                )
                head = report.commit_sha or head
                made.append(report)
        except RateLimitedError as limited:
            left = sum(len(p) for p, d in zip(parts[index:], every[index:], strict=True) if not d.is_empty)
            raise _commits_left(limited, left - len(made), commits) from limited
        report = _joined(made)
        save_record(request.run_dir, api.endpoint, diff.plan, report.commit_sha or diff.remote.head_sha or "")
        if diff.plan.revision != "main":
            report = replace(report, steps=diff.plan.steps)
        reports.append(report)
    by_branch = {r.revision: r for r in reports[len(diffs) :]}
    return Committed(
        tuple(reports[: len(diffs)]), tuple(by_branch[b.plan.revision] for b in branch_diffs), notes
    )


def _before_parts(
    api: HfApi, diff: RepoDiff, retry: RetryPolicy, first_commits: dict[str, str]
) -> tuple[frozenset[str], str]:
    """Before the first of a split repo's commits: the repo (or branch) made if it is new, and every object
    of the diff sent (`upload_all`). Returns the objects sent and the head to commit on top of."""
    with hub_errors(diff.plan.repo_id, api.endpoint):
        head = head_to_commit_on(api, diff, retry=retry, first_commits=first_commits)
        return upload_all(api, after(diff, head), retry), head


def _joined(made: list[RepoReport]) -> RepoReport:
    """One repo's report from its commits' (the last commit; every file, byte and step)."""
    last = made[-1]
    if len(made) == 1:
        return last
    steps = tuple(sorted({s for r in made for s in r.steps}))
    return replace(
        last,
        files_uploaded=sum(r.files_uploaded for r in made),
        bytes_uploaded=sum(r.bytes_uploaded for r in made),
        steps=steps,
        commits=len([r for r in made if r.commit_sha is not None]),
    )


def _commits_left(limited: RateLimitedError, count: int, commits: int) -> RateLimitedError:
    """The push's one line when the Hub's rate limit outlasts its wait: the commits left, and when to rerun."""
    until = limited.until
    if isinstance(until, datetime):
        seconds = math.ceil((until - datetime.now(UTC)).total_seconds())
        when = f"after {clock(until)} (it makes only those), or give it --max-wait {max(seconds, 1)} to wait"
    else:
        when = "in a few minutes (it makes only those)"
    return RateLimitedError(
        f"{limited.refusal}: {count} of this push's {commits} commits are left: run the push again {when}",
        until=until,
        refusal=limited.refusal,
    )
