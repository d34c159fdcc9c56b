"""What a Hub repo holds now, read in one request and retried as `hubkit.hub.retry` retries: its head
commit and, per file, its size and the hashes the Hub reports (`RemoteRepo`, the one listing of a repo:
the push's reads and commits, a release read back, `hubkit eval --push`); its branches (`branch_names`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from huggingface_hub import HfApi
from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

from hubkit.errors import RepoNotFoundError
from hubkit.hub.repo_types import RepoType
from hubkit.hub.retry import DEFAULT_RETRY, RetryPolicy, with_retries


@dataclass(frozen=True)
class RemoteFile:
    """A file on the Hub: its git blob id, and its sha256 when it is stored in LFS."""

    path: str
    size: int
    git_sha1: str
    lfs_sha256: str | None = None


@dataclass(frozen=True)
class RemoteRepo:
    """A repo's state at one commit. `head_sha` is None when the repo (or its branch) does not exist.

    `card_data` is its card's metadata as the Hub parsed it (``cardData``), None without a card.
    """

    repo_id: str
    head_sha: str | None
    files: dict[str, RemoteFile] = field(default_factory=dict)
    private: bool | None = None
    card_data: dict[str, Any] | None = None

    @property
    def exists(self) -> bool:
        return self.head_sha is not None

    def head(self, endpoint: str | None) -> str:
        """The head commit of a repo that exists; RepoNotFoundError for one that does not."""
        if self.head_sha is None:
            raise RepoNotFoundError(
                f"{self.repo_id} is not on {endpoint or 'the Hub'} (or is private): check the repo id, "
                "--endpoint and the token"
            )
        return self.head_sha

    @property
    def content_ids(self) -> dict[str, str]:
        """Every file's content id, by path: its LFS sha256, else its git blob id."""
        return {path: f.lfs_sha256 or f.git_sha1 for path, f in self.files.items()}

    @property
    def sizes(self) -> dict[str, int]:
        """Every file's size in bytes, by path (0 where the Hub gave none)."""
        return {path: max(f.size, 0) for path, f in self.files.items()}


def read_remote(
    api: HfApi,
    repo_id: str,
    repo_type: RepoType = "model",
    revision: str = "main",
    retry: RetryPolicy = DEFAULT_RETRY,
) -> RemoteRepo:
    """Fetch the head commit of `revision` and every file at that commit, in one request.

    The repo's info with each file's metadata (`files_metadata=True`: size, blob id, LFS sha256) names
    the head and its files in the same answer, so the files and the `parent_commit` of the next
    commit describe the same state. A repo (or branch) that does not exist yet reads as an empty
    `RemoteRepo` (head_sha None).

    Raises:
        HubUnreachableError, RateLimitedError: the Hub kept failing transiently (`with_retries`).
    """
    return with_retries(
        lambda: _read_remote(api, repo_id, repo_type, revision), retry, f"reading {repo_id}", api.endpoint
    )


def _read_remote(api: HfApi, repo_id: str, repo_type: RepoType, revision: str) -> RemoteRepo:
    try:
        info = api.repo_info(repo_id, repo_type=repo_type, revision=revision, files_metadata=True)
    except (RepositoryNotFoundError, RevisionNotFoundError):
        return RemoteRepo(repo_id=repo_id, head_sha=None)
    files = {
        sibling.rfilename: RemoteFile(
            path=sibling.rfilename,
            size=sibling.size if sibling.size is not None else -1,
            git_sha1=sibling.blob_id or "",
            lfs_sha256=sibling.lfs.sha256 if sibling.lfs else None,
        )
        for sibling in info.siblings or ()
    }
    card_data = info.card_data
    return RemoteRepo(
        repo_id=repo_id,
        head_sha=info.sha,
        files=files,
        private=info.private,
        card_data=card_data.to_dict() if card_data is not None else None,
    )


def branch_names(api: HfApi, repo_id: str, retry: RetryPolicy = DEFAULT_RETRY) -> frozenset[str]:
    """The branches of a model repo, in one call (none when the repo does not exist): a push reads only
    the step branches that exist, not one request per branch it may write."""

    def read() -> frozenset[str]:
        try:
            return frozenset(b.name for b in api.list_repo_refs(repo_id).branches)
        except RepositoryNotFoundError:
            return frozenset()

    return with_retries(read, retry, f"reading {repo_id}'s branches", api.endpoint)
