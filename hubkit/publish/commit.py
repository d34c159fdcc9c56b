"""Turn a `RepoDiff` into at most one commit, with `parent_commit` set.

Large files are uploaded first (LFS objects, several at a time, each reported to a progress
callback); the commit that makes them visible comes last. A push that dies before the commit
leaves the repo at its previous commit, and the next push uploads what is still missing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx2
from huggingface_hub import CommitOperationAdd, HfApi
from huggingface_hub.errors import HfHubHTTPError

from hubkit.errors import AuthError, PublishError
from hubkit.publish.diff import RepoDiff
from hubkit.publish.plan import PlannedFile

# Weights, and anything this big, get their own LFS upload (and progress tick) before the commit;
# small text files travel with the commit call. The Hub stores files >= 10 MiB in LFS whatever they are.
_SEPARATE_UPLOAD_MIN_BYTES = 1024 * 1024
_WEIGHT_SUFFIXES = (".safetensors", ".gguf")
_UPLOAD_THREADS = 4

UploadCallback = Callable[[PlannedFile], None]


@dataclass(frozen=True)
class CommitResult:
    """What one repo's push did. `commit_sha` is None when nothing had changed."""

    repo_id: str
    commit_sha: str | None
    uploaded_files: int
    uploaded_bytes: int
    steps: tuple[int, ...]
    summary: str | None = None


@contextlib.contextmanager
def hub_errors(repo_id: str, endpoint: str) -> Iterator[None]:
    """Map the client's HTTP failures to one-line `HubkitError`s that say what to do."""
    try:
        yield
    except HfHubHTTPError as e:
        status = e.response.status_code if e.response is not None else None
        if status in (401, 403):
            raise AuthError(
                f"{endpoint} refused access to {repo_id} (HTTP {status}): set HF_TOKEN or run `hf auth login` "
                "with a token that can write to it"
            ) from e
        if status == 412:
            raise PublishError(
                f"{repo_id} changed on the Hub while pushing; nothing was committed, run the push again"
            ) from e
        raise PublishError(
            f"the Hub refused the push to {repo_id} (HTTP {status}): {e.server_message or e}"
        ) from e
    except httpx2.TransportError as e:
        raise PublishError(
            f"cannot reach {endpoint} ({type(e).__name__}): check --endpoint / HF_ENDPOINT"
        ) from e


def commit_message(diff: RepoDiff) -> tuple[str, str]:
    """The commit's summary and description: the steps it adds, then every changed path."""
    steps = diff.changed_steps
    if steps:
        summary = f"{diff.plan.title}: steps {', '.join(str(s) for s in steps)}"
    else:
        summary = f"{diff.plan.title}: update {', '.join(f.path_in_repo for f in diff.changed[:3])}"
        if len(diff.changed) > 3:
            summary += f" and {len(diff.changed) - 3} more"
    description = "\n".join(f"- {f.path_in_repo}" for f in diff.changed)
    return summary, description


def _operation(planned: PlannedFile) -> CommitOperationAdd:
    source = str(planned.local_path) if planned.local_path is not None else planned.content
    return CommitOperationAdd(path_in_repo=planned.path_in_repo, path_or_fileobj=source)  # type: ignore[arg-type]


def _separate_uploads(changed: tuple[PlannedFile, ...]) -> list[PlannedFile]:
    """The files uploaded one by one before the commit: weights and large files, one per content.

    A second file with the same content (the root adapter is a copy of the newest checkpoint's) is
    left to the commit call, where the LFS batch finds the object already uploaded.
    """
    seen: set[str] = set()
    separate = []
    for planned in changed:
        large = planned.size >= _SEPARATE_UPLOAD_MIN_BYTES or planned.path_in_repo.endswith(_WEIGHT_SUFFIXES)
        if large and planned.hashes.sha256 not in seen:
            seen.add(planned.hashes.sha256)
            separate.append(planned)
    return separate


def commit_repo(api: HfApi, diff: RepoDiff, on_uploaded: UploadCallback | None = None) -> CommitResult:
    """Upload the diff's changed files and make one commit on top of the head that was diffed.

    Args:
        api: a client bound to the endpoint and token.
        diff: from `hubkit.publish.diff.diff_repo`.
        on_uploaded: called once per file when its bytes are on the Hub (for progress bars).

    Returns:
        The commit made, or a result with `commit_sha` None when the diff was empty.

    Raises:
        AuthError: the Hub wants a (better) token.
        PublishError: the Hub refused, could not be reached, or the repo moved since it was read.
    """
    plan = diff.plan
    if diff.is_empty:
        return CommitResult(plan.repo_id, None, 0, 0, ())
    with hub_errors(plan.repo_id, api.endpoint):
        parent = diff.remote.head_sha
        if parent is None:
            api.create_repo(
                plan.repo_id,
                repo_type=plan.repo_type,
                private=plan.private,
                exist_ok=True,
                space_sdk=plan.space_sdk,
            )
            parent = api.repo_info(plan.repo_id, repo_type=plan.repo_type).sha
        operations = {f.path_in_repo: _operation(f) for f in diff.changed}
        separate = _separate_uploads(diff.changed)

        def upload_one(planned: PlannedFile) -> None:
            api.preupload_lfs_files(
                plan.repo_id, additions=[operations[planned.path_in_repo]], repo_type=plan.repo_type
            )
            if on_uploaded is not None:
                on_uploaded(planned)

        with ThreadPoolExecutor(max_workers=_UPLOAD_THREADS) as pool:
            # list() re-raises the first upload failure here.
            list(pool.map(upload_one, separate))
        summary, description = commit_message(diff)
        info = api.create_commit(
            plan.repo_id,
            operations=list(operations.values()),
            commit_message=summary,
            commit_description=description,
            repo_type=plan.repo_type,
            parent_commit=parent,
        )
    if on_uploaded is not None:
        uploaded_first = {f.path_in_repo for f in separate}
        for planned in diff.changed:
            if planned.path_in_repo not in uploaded_first:
                on_uploaded(planned)
    return CommitResult(
        repo_id=plan.repo_id,
        commit_sha=info.oid,
        uploaded_files=len(diff.changed),
        uploaded_bytes=diff.upload_size,
        steps=diff.changed_steps,
        summary=summary,
    )
