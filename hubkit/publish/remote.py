"""Read what a Hub repo holds now: its head commit and, per file, the hashes the Hub reports."""

from __future__ import annotations

from dataclasses import dataclass, field

from huggingface_hub import HfApi
from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError
from huggingface_hub.hf_api import RepoFile

from hubkit.publish.plan import RepoType
from hubkit.publish.retry import DEFAULT_RETRY, RetryPolicy, with_retries


@dataclass(frozen=True)
class RemoteFile:
    """A file on the Hub: its git blob id, and its sha256 when it is stored in LFS."""

    path: str
    size: int
    git_sha1: str
    lfs_sha256: str | None = None


@dataclass(frozen=True)
class RemoteRepo:
    """A repo's state at one commit. `head_sha` is None when the repo (or its branch) does not exist."""

    repo_id: str
    head_sha: str | None
    files: dict[str, RemoteFile] = field(default_factory=dict)
    private: bool | None = None

    @property
    def exists(self) -> bool:
        return self.head_sha is not None


def read_remote(
    api: HfApi,
    repo_id: str,
    repo_type: RepoType = "model",
    revision: str = "main",
    retry: RetryPolicy = DEFAULT_RETRY,
) -> RemoteRepo:
    """Fetch the head commit of `revision` and the full file tree at that commit.

    The tree is listed at the head sha (not the branch name) so that the listing and the
    `parent_commit` of the next commit describe the same state.

    Args:
        api: a client bound to the target endpoint and token.
        repo_id: "owner/name".
        repo_type: "model", "dataset" or "space".
        revision: the branch to read.
        retry: how transient failures (429, 5xx, dropped connections) are retried.

    Returns:
        The remote state; an empty `RemoteRepo` (head_sha None) if the repo does not exist yet.

    Raises:
        PublishError: the Hub kept failing transiently.
    """
    return with_retries(
        lambda: _read_remote(api, repo_id, repo_type, revision), retry, f"reading {repo_id}", api.endpoint
    )


def _read_remote(api: HfApi, repo_id: str, repo_type: RepoType, revision: str) -> RemoteRepo:
    try:
        info = api.repo_info(repo_id, repo_type=repo_type, revision=revision)
    except (RepositoryNotFoundError, RevisionNotFoundError):
        return RemoteRepo(repo_id=repo_id, head_sha=None)
    files: dict[str, RemoteFile] = {}
    for entry in api.list_repo_tree(repo_id, repo_type=repo_type, revision=info.sha, recursive=True):
        if isinstance(entry, RepoFile):
            files[entry.path] = RemoteFile(
                path=entry.path,
                size=entry.size,
                git_sha1=entry.blob_id,
                lfs_sha256=entry.lfs.sha256 if entry.lfs else None,
            )
    return RemoteRepo(repo_id=repo_id, head_sha=info.sha, files=files, private=info.private)
