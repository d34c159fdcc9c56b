"""Publishing: plan (desired files per repo, from local files) → diff (against the remote) → commit
(at most one per repo, with `parent_commit`). Needs the `hub` extra."""

from hubkit.publish.adapter_repo import plan_adapter_repo, plan_push, prepare_adapters, select_checkpoints
from hubkit.publish.auth import hub_client, is_local_endpoint, resolve_token
from hubkit.publish.commit import CommitResult, commit_repo
from hubkit.publish.diff import RepoDiff, diff_repo
from hubkit.publish.plan import PlannedFile, PushPlan, RepoPlan
from hubkit.publish.push import commit_push, diff_push
from hubkit.publish.remote import RemoteFile, RemoteRepo, read_remote

__all__ = [
    "CommitResult",
    "PlannedFile",
    "PushPlan",
    "RemoteFile",
    "RemoteRepo",
    "RepoDiff",
    "RepoPlan",
    "commit_push",
    "commit_repo",
    "diff_push",
    "diff_repo",
    "hub_client",
    "is_local_endpoint",
    "plan_adapter_repo",
    "plan_push",
    "prepare_adapters",
    "read_remote",
    "resolve_token",
    "select_checkpoints",
]
