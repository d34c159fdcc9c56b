"""Turn a `RepoDiff` into at most one commit, with `parent_commit` set, through a Hub that may fail.

Large files are uploaded first (LFS objects, several at a time, each reported to a progress
callback); the commit that makes them visible comes last. The client is handed the sha256 that
hubkit computed while checking each file, so no file is read to be hashed again.

Transient failures (408, 429, 5xx, dropped or refused connections) are retried
(`hubkit.hub.retry`). An upload is always safe to repeat: the LFS batch answer tells the client
which objects the Hub already holds, and only the others are sent. A commit is sent again only once
it is certain it was not applied: after a failure the repo is read again, and the commit is retried
when its head is still the parent; when the head moved and holds exactly this push's files, the
commit was applied and its answer lost. With `parent_commit` set, a repeated commit cannot apply
twice. A push that gives up leaves the repo at its previous commit (the Hub never shows a commit
naming an object it does not hold), and the next push sends only what is still missing.

Because an LFS object is invisible until a commit names it, the weights of a repo that exists (or was
just created, every check passed) can be sent ahead (`UploadsAhead`) while the rest of the push
(merge, cards) is still being built. `hubkit.publish.push_commits.commit_plan` commits every repo of a
push, in order and in commits of a bounded size, and records each in the run directory.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from huggingface_hub import CommitOperationAdd, HfApi
from huggingface_hub.errors import HfHubHTTPError
from huggingface_hub.utils import build_hf_headers

from hubkit.errors import PublishError
from hubkit.hub import pacing
from hubkit.hub.failures import hub_errors
from hubkit.hub.hashing import FileHashes
from hubkit.hub.remote import read_remote
from hubkit.hub.repo_types import RepoType, repo_url
from hubkit.hub.retry import (
    DEFAULT_RETRY,
    SINGLE_TRY,
    RetryPolicy,
    transient_cause,
    wait_to_try_again,
    with_retries,
)
from hubkit.publish.create import head_to_commit_on
from hubkit.publish.diff import RepoDiff, is_same_content
from hubkit.publish.plan import PlannedFile, RepoPlan
from hubkit.publish.request import RepoReport

logger = logging.getLogger(__name__)

# Weights, and anything this big, get their own LFS upload (and progress tick) before the commit;
# small text files travel with the commit call. The Hub stores files >= 10 MiB in LFS whatever they are.
_SEPARATE_UPLOAD_MIN_BYTES = 1024 * 1024
_WEIGHT_SUFFIXES = (".safetensors", ".gguf")
_UPLOAD_THREADS = 4
_AHEAD_GROUP = 25  # files of one upload ahead

UploadCallback = Callable[[PlannedFile], None]


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
    if planned.local_path is None:
        return CommitOperationAdd(path_in_repo=planned.path_in_repo, path_or_fileobj=planned.content)  # type: ignore[arg-type]
    operation = CommitOperationAdd(path_in_repo=planned.path_in_repo, path_or_fileobj=str(planned.local_path))
    hand_in_sha256(operation, planned.hashes)
    return operation


def hand_in_sha256(operation: CommitOperationAdd, hashes: FileHashes) -> None:
    """Give the client the sha256 hubkit computed while checking the file, so it does not read it to hash it.

    huggingface_hub 2.4 computes an `UploadInfo`'s sha256 lazily from the file and lets it be set
    (`UploadInfo.sha256` has a setter; `is_hashed` says whether it is known). Kept in this one place, and
    tested, in case the client changes how it hashes.

    Raises:
        PublishError: the file's size changed since it was hashed.
    """
    info = operation.upload_info
    if info.size != hashes.size:
        raise PublishError(
            f"{operation.path_in_repo} changed since it was checked ({hashes.size} bytes, now {info.size}): "
            "push again once the run has finished writing it"
        )
    info.sha256 = bytes.fromhex(hashes.sha256)


def _upload_lfs(
    api: HfApi,
    repo_id: str,
    repo_type: RepoType,
    revision: str,
    addition: CommitOperationAdd | list[CommitOperationAdd],
    retry: RetryPolicy,
) -> frozenset[str]:
    """Send one file's LFS object (nothing when the Hub already holds it) through huggingface_hub's own
    transfer (Xet, or classic LFS where the Hub or the client has Xet off), retrying transient failures.

    The revision is the one committed to: the client compares the file with that revision's and drops an
    addition equal to it from the commit (asked about main, a step branch would lose its adapter).
    """
    additions = addition if isinstance(addition, list) else [addition]
    # hf_xet's own request for its write token, which the client's hooks do not see (`hubkit.hub.pacing`).
    authorization = build_hf_headers(token=api.token).get("authorization")
    pacing.PACER.take(pacing.origin(api.endpoint), pacing.account_of(authorization))
    names = additions[0].path_in_repo + (f" and {len(additions) - 1} more" if len(additions) > 1 else "")
    with_retries(
        lambda: api.preupload_lfs_files(repo_id, additions=additions, repo_type=repo_type, revision=revision),
        retry,
        f"uploading {names} to {repo_id}",
        api.endpoint,
    )
    return _sent_as_lfs(additions)


def _sent_as_lfs(additions: list[CommitOperationAdd]) -> frozenset[str]:
    """The sha256 of the additions the Hub took as LFS objects (a small text file, vocab.json under the
    Hub's 10 MB, is to be sent in the commit itself: the preupload left it there)."""
    return frozenset(a.upload_info.sha256.hex() for a in additions if a._upload_mode == "lfs")


def _marked_sent(operation: CommitOperationAdd) -> None:
    """An LFS file whose object this push has sent to the repo already: the commit asks nothing about it
    and sends it again to no one (the client would ask the Hub and run a Xet session per commit)."""
    operation._upload_mode = "lfs"
    operation._is_uploaded = True


class UploadsAhead:
    """The weights of an existing repo, sent in the background while the rest of the push is built.

    Sending an LFS object publishes nothing: if the push stops before its commit (a refusal, a failure,
    Ctrl-C), the repo is as it was and the next push finds the object on the Hub. `commit_repo` waits
    for these uploads and sends only what they did not.

    `diff`: the repo's files so far (weights are what matters) against its remote, which must exist.
    """

    def __init__(self, api: HfApi, diff: RepoDiff, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        if not diff.remote.exists:
            raise ValueError(f"{diff.plan.repo_id} does not exist yet: nothing can be uploaded ahead")
        self.repo_id = diff.plan.repo_id
        self.diff = diff
        self._pool = ThreadPoolExecutor(max_workers=_UPLOAD_THREADS, thread_name_prefix="hubkit-upload")
        # In groups of up to `_AHEAD_GROUP` files, one preupload call and one Xet session each: the Hub
        # counts every call against the account's window (a file a call: 2 calls per checkpoint).
        separate = _separate_uploads(diff.changed)
        size = max(1, min(_AHEAD_GROUP, -(-len(separate) // _UPLOAD_THREADS)))
        groups = [separate[i : i + size] for i in range(0, len(separate), size)]
        self._futures = {}
        for group in groups:
            future = self._pool.submit(
                _upload_lfs,
                api,
                self.repo_id,
                diff.plan.repo_type,
                diff.plan.revision,
                [_operation(planned) for planned in group],
                retry,
            )
            self._futures |= {planned.hashes.sha256: future for planned in group}

    def sent(self) -> frozenset[str]:
        """Wait for every upload; return the sha256 of the objects now on the Hub.

        Raises:
            The first upload's failure, as `commit_repo`'s own uploads raise it.
        """
        return frozenset().union(*(future.result() for future in set(self._futures.values())))

    def close(self, *, wait: bool = False) -> None:
        """Cancel the uploads not started; the ones under way finish in the background, or before this
        returns with `wait` (the repo is about to be removed: nothing may still write to it)."""
        self._pool.shutdown(wait=wait, cancel_futures=True)


def _is_large(planned: PlannedFile) -> bool:
    return planned.size >= _SEPARATE_UPLOAD_MIN_BYTES or planned.path_in_repo.endswith(_WEIGHT_SUFFIXES)


def _separate_uploads(changed: tuple[PlannedFile, ...]) -> list[PlannedFile]:
    """The files uploaded one by one before the commit: weights and large files, one per content.

    A second file with the same content (the root adapter is a copy of the newest checkpoint's) is
    left to the commit call, where the LFS batch finds the object already uploaded.
    """
    seen: set[str] = set()
    separate = []
    for planned in changed:
        if _is_large(planned) and planned.hashes.sha256 not in seen:
            seen.add(planned.hashes.sha256)
            separate.append(planned)
    return separate


def commit_repo(
    api: HfApi,
    diff: RepoDiff,
    on_uploaded: UploadCallback | None = None,
    retry: RetryPolicy = DEFAULT_RETRY,
    ahead: UploadsAhead | None = None,
    first_commits: dict[str, str] | None = None,
    uploaded: frozenset[str] = frozenset(),
) -> RepoReport:
    """Upload the diff's changed files and make one commit on top of the head that was diffed: the commit
    made (or found applied), `commit_sha` None when the diff was empty.

    Args:
        on_uploaded: called once per file when its bytes are on the Hub (for progress bars).
        ahead: this repo's weights already being uploaded; their objects are not sent again.
        first_commits: as `create_branch`'s, shared by a push's commits.
        uploaded: the sha256 of objects already sent for this commit (a split push's, sent before its first
            commit); they are not uploaded again.

    Raises:
        AuthError: the Hub wants a (better) token.
        PublishError: the Hub refused, kept failing, could not be reached, or the repo moved since it was read.
    """
    plan = diff.plan
    if diff.is_empty:
        return _report(api.endpoint, plan, None, 0, 0, ())
    endpoint = api.endpoint
    with hub_errors(plan.repo_id, endpoint):
        parent = head_to_commit_on(api, diff, retry=retry, first_commits=first_commits)
        operations = {f.path_in_repo: _operation(f) for f in diff.changed}
        separate = _separate_uploads(diff.changed)
        sent_ahead = ahead.sent() if ahead is not None and ahead.repo_id == plan.repo_id else frozenset()
        sent_ahead |= uploaded
        for planned in diff.changed:
            if _is_large(planned) and planned.hashes.sha256 in sent_ahead:
                _marked_sent(operations[planned.path_in_repo])

        def upload_one(planned: PlannedFile) -> None:
            if planned.hashes.sha256 not in sent_ahead:
                _upload_lfs(
                    api, plan.repo_id, plan.repo_type, plan.revision, operations[planned.path_in_repo], retry
                )
            if on_uploaded is not None:
                on_uploaded(planned)

        with ThreadPoolExecutor(max_workers=_UPLOAD_THREADS) as pool:
            # list() re-raises the first upload failure here.
            list(pool.map(upload_one, separate))
        summary, description = commit_message(diff)

        def send() -> str:
            info = api.create_commit(
                plan.repo_id,
                operations=list(operations.values()),
                commit_message=summary,
                commit_description=description,
                repo_type=plan.repo_type,
                revision=plan.revision,
                parent_commit=parent,
            )
            return info.oid

        commit_sha = _commit_once(api, diff, parent, send, retry)
    if on_uploaded is not None:
        uploaded_first = {f.path_in_repo for f in separate}
        for planned in diff.changed:
            if planned.path_in_repo not in uploaded_first:
                on_uploaded(planned)
    return _report(endpoint, plan, commit_sha, len(diff.changed), diff.upload_size, diff.changed_steps)


def _report(
    endpoint: str, plan: RepoPlan, commit_sha: str | None, files: int, size: int, steps: tuple[int, ...]
) -> RepoReport:
    url = repo_url(plan.repo_id, plan.repo_type, endpoint)
    return RepoReport(
        repo_id=plan.repo_id,
        repo_type=plan.repo_type,
        url=url if plan.revision == "main" else f"{url}/tree/{plan.revision}",
        commit_sha=commit_sha,
        files_uploaded=files,
        bytes_uploaded=size,
        steps=steps,
        revision=plan.revision,
    )


def _commit_once(api: HfApi, diff: RepoDiff, parent: str, send: Callable[[], str], retry: RetryPolicy) -> str:
    """Send the commit until it is applied once: it is sent again only while the repo's head is `parent`.

    Returns:
        The commit's sha (the repo's head when the commit was applied but its answer was lost).

    Raises:
        PublishError: the tries ran out, or someone else's commit moved the repo meanwhile.
    """
    what = f"committing to {diff.plan.repo_id}"
    delays = retry.delays()
    waited = 0.0
    while True:
        try:
            return send()
        except Exception as error:
            if (
                isinstance(error, HfHubHTTPError)
                and error.response is not None
                and error.response.status_code == 412
            ):
                head = _applied_head(
                    api, diff, parent
                )  # the head moved: by this commit, or by someone else's
                if head is None:
                    raise
                return head
            failure = transient_cause(error)
            if failure is None:
                raise
        # Whether the commit was applied is not known: nothing is sent again before the repo is read.
        while True:
            waited = wait_to_try_again(
                failure, retry, delays, waited, what, api.endpoint, doing="reading the repo again"
            )
            try:
                head = _applied_head(api, diff, parent)
            except Exception as unreadable:
                cause = transient_cause(unreadable)
                if cause is None:
                    raise
                failure = cause
                continue
            if head is not None:
                return head
            break  # still at `parent`: the commit was not applied, send it again


def _applied_head(api: HfApi, diff: RepoDiff, parent: str) -> str | None:
    """After a commit failed: None when the repo's head is still `parent` (the commit was not applied), the
    head when it moved and holds exactly this commit's files (it was applied; its answer was lost).

    Raises:
        PublishError: the head moved without this commit's files (someone else pushed), or the Hub failed.
    """
    plan = diff.plan
    remote = read_remote(api, plan.repo_id, plan.repo_type, revision=plan.revision, retry=SINGLE_TRY)
    if remote.head_sha == parent:
        return None
    if remote.head_sha is not None and all(
        is_same_content(f, remote.files.get(f.path_in_repo)) for f in diff.changed
    ):
        return remote.head_sha
    raise PublishError(
        f"{plan.repo_id} changed on the Hub while pushing; nothing was committed, run the push again"
    )


def upload_all(api: HfApi, diff: RepoDiff, retry: RetryPolicy = DEFAULT_RETRY) -> frozenset[str]:
    """Send every object of `diff` (the repo must exist) in one `preupload` call, before any of its commits.

    The client asks the Hub about all of the files first (`preupload`, 256 files per request), then uploads
    the LFS ones: a refusal for the whole (a storage quota's 403) comes before any byte is sent and before
    the first of a split push's commits, so the repo is left as it was.

    Returns:
        The sha256 of the LFS objects sent (or found on the Hub): `commit_repo` does not upload them again.
    """
    plan = diff.plan
    additions = [_operation(f) for f in diff.changed]
    with_retries(
        lambda: api.preupload_lfs_files(
            plan.repo_id, additions=additions, repo_type=plan.repo_type, revision=plan.revision
        ),
        retry,
        f"uploading {len(additions)} files to {plan.repo_id}",
        api.endpoint,
    )
    return _sent_as_lfs(additions)
