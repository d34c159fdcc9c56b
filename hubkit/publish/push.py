"""Carry out a push plan: read each repo's remote state, diff, and commit what changed."""

from __future__ import annotations

from huggingface_hub import HfApi

from hubkit.publish.commit import CommitResult, UploadCallback, commit_repo, hub_errors
from hubkit.publish.diff import RepoDiff, diff_repo
from hubkit.publish.plan import PushPlan
from hubkit.publish.remote import read_remote


def diff_push(api: HfApi, plan: PushPlan) -> tuple[RepoDiff, ...]:
    """Read every planned repo's remote state and diff the plan against it.

    Args:
        api: a client bound to the endpoint and token.
        plan: the push plan.

    Returns:
        One diff per repo, in plan order.

    Raises:
        AuthError, PublishError: the Hub refused or could not be reached.
    """
    diffs = []
    for repo in plan.repos:
        with hub_errors(repo.repo_id, api.endpoint):
            remote = read_remote(api, repo.repo_id, repo.repo_type)
        diffs.append(diff_repo(repo, remote))
    return tuple(diffs)


def commit_push(
    api: HfApi, diffs: tuple[RepoDiff, ...], on_uploaded: UploadCallback | None = None
) -> tuple[CommitResult, ...]:
    """Make at most one commit per repo; repos whose diff is empty get none.

    Args:
        api: a client bound to the endpoint and token.
        diffs: from `diff_push`.
        on_uploaded: called once per uploaded file (progress).

    Returns:
        One result per repo, in plan order.

    Raises:
        AuthError, PublishError: as `hubkit.publish.commit.commit_repo`.
    """
    return tuple(commit_repo(api, diff, on_uploaded) for diff in diffs)
