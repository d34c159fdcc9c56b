"""A published release read back: its manifest and reward (`read_release_manifest`, `read_release_reward`:
`hubkit reward show`, the Space), and the release as a `Run`: its listing at one commit, then the files a
command needs.

    release = read_release("me/qwen3-4b-grpo", endpoint=..., token=...)
    run = download_release(release, steps=(100, 200), extra=("train_problems.sha256",), ...)
    run.checkpoints   # every published step; the downloaded ones have their adapter_dir
    run.run_dir       # the client's cache folder of that commit, laid out as the repo

Everything is read at the commit the listing was taken at, so the manifest, the metrics and the adapters
belong to one state of the repo. Files are downloaded through the client's cache (a second command on the
same release downloads nothing), only those asked for: the manifest, the metrics, the tokenizer at the
root, each chosen step's adapter files, and `extra`. Nothing from the repo is executed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hubkit.errors import ManifestError, ReleaseError, RewardSpecError
from hubkit.hub.download import download_repo_file
from hubkit.hub.failures import hub_errors
from hubkit.hub.remote import RemoteRepo, read_remote
from hubkit.release.layout import (
    METRICS_NAME,
    TOKENIZER_FILES,
    checkpoint_dir,
    checkpoint_files,
    steps_in_paths,
)
from hubkit.release.metrics import read_release_metrics
from hubkit.rewards.spec import RewardSpec
from hubkit.runs.manifest import MANIFEST_NAME, Manifest
from hubkit.runs.model import Checkpoint, Metrics, Run
from hubkit.safety import kinds


@dataclass(frozen=True)
class Release:
    """A release's adapter repo at one commit (the head of the main branch when it was read): its
    ``hubkit.json``, and every file there, by path: its content id (the LFS sha256, else the git blob id)
    and its size as the listing gives it."""

    repo_id: str
    commit: str
    manifest: Manifest
    files: dict[str, str] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)

    @classmethod
    def listed(cls, listing: RemoteRepo, manifest: Manifest, endpoint: str | None) -> Release:
        """The repo `listing` read (`hubkit.hub.remote.read_remote`), with `manifest`.

        Raises:
            RepoNotFoundError: the repo does not exist.
        """
        head = listing.head(endpoint)
        return cls(listing.repo_id, head, manifest, files=listing.content_ids, sizes=listing.sizes)

    @property
    def steps(self) -> tuple[int, ...]:
        """The published checkpoint steps."""
        return steps_in_paths(self.files)

    @property
    def has_tokenizer(self) -> bool:
        """Whether the root holds the run's tokenizer (``tokenizer_config.json``)."""
        return "tokenizer_config.json" in self.files


def read_release(repo_id: str, *, endpoint: str | None = None, token: str | None = None) -> Release:
    """The release at the head of `repo_id`'s main branch: its files (listed in one request, retried:
    `hubkit.hub.remote.read_remote`) and its manifest.

    Raises:
        HubError: the repo cannot be read (`hubkit.hub.failures`).
        ReleaseError: it has no ``hubkit.json`` or no checkpoint.
    """
    from huggingface_hub import HfApi

    with hub_errors(repo_id, endpoint):
        listing = read_remote(HfApi(endpoint=endpoint, token=token), repo_id)
    return release_of(listing, endpoint=endpoint, token=token)


def release_of(listing: RemoteRepo, *, endpoint: str | None = None, token: str | None = None) -> Release:
    """The release an adapter repo's listing (`hubkit.hub.remote.read_remote`) shows: its manifest read at
    the listed commit.

    Raises:
        RepoNotFoundError: the repo does not exist.
        HubError: the manifest cannot be read.
        ReleaseError: it has no ``hubkit.json`` or no checkpoint.
    """
    manifest = read_release_manifest(listing.repo_id, listing.head(endpoint), endpoint=endpoint, token=token)
    release = Release.listed(listing, manifest, endpoint)
    if not release.steps:
        raise ReleaseError(
            f"{listing.repo_id} holds no checkpoints/global_step_N/ adapter: push the run's checkpoints first"
        )
    return release


def download_release(
    release: Release,
    steps: Sequence[int],
    *,
    extra: Sequence[str] = (),
    endpoint: str | None = None,
    token: str | None = None,
    read_metrics: bool = True,
) -> Run:
    """Download what a command needs of `release` and read it as a `Run`.

    Args:
        steps: the steps whose adapters to download (each one the release publishes).
        extra: other paths to download when the release has them (e.g. ``train_problems.sha256``).
        read_metrics: False to leave the metrics unread (`Run.metrics` empty): a listing of the steps.

    Returns:
        The run: every published step as a complete checkpoint (`adapter_dir` set for the downloaded
        ones), the published metrics, `run_dir` the downloaded folder; `finished` as the manifest records.

    Raises:
        ReleaseError: a step the release does not publish, a file larger than its kind, bad metrics.
        HubError: the download failed (`hubkit.hub.failures`).
    """
    missing = sorted(set(steps) - set(release.steps))
    if missing:
        raise ReleaseError(f"{release.repo_id} publishes no step {', '.join(map(str, missing))}")
    wanted = [MANIFEST_NAME, METRICS_NAME, *TOKENIZER_FILES, *extra]
    wanted += [path for step in steps for path in checkpoint_files(step)]
    folder = download_release_files(release, wanted, endpoint=endpoint, token=token)
    root_tokenizer = folder if release.has_tokenizer else None
    checkpoints = tuple(
        Checkpoint(
            step=step,
            path=folder / checkpoint_dir(step),
            adapter_dir=folder / checkpoint_dir(step) if step in steps else None,
            # A release publishes one tokenizer, the newest step's, at its root.
            tokenizer_dir=root_tokenizer,
        )
        for step in release.steps
    )
    present = read_metrics and METRICS_NAME in release.files
    metrics = read_release_metrics(folder / METRICS_NAME, release.repo_id) if present else Metrics()
    return Run(
        run_dir=folder,
        manifest=release.manifest,
        checkpoints=checkpoints,
        pending=(),
        metrics=metrics,
        finished=release.manifest.finished_at is not None,
    )


def download_release_files(
    release: Release,
    paths: Sequence[str],
    *,
    endpoint: str | None,
    token: str | None,
) -> Path:
    """Download those of `paths` the release has, each bounded by its kind's size (`kinds.max_bytes_of`;
    a path of no kind is not downloaded) on the listing before any byte is downloaded; the folder they are
    in, laid out as the repo.

    Raises:
        ReleaseError: a file larger than its kind.
        HubError: the download failed.
    """
    from huggingface_hub import snapshot_download

    present = [path for path in dict.fromkeys(paths) if path in release.files]
    for path in present:
        size, bound = release.sizes.get(path, 0), kinds.max_bytes_of(path)
        if bound is None or size > bound:
            raise ReleaseError(
                f"{release.repo_id}: {path} is {size} bytes, more than such a file may be ({bound or 0} bytes): "
                "refusing to download it"
            )
    with hub_errors(release.repo_id, endpoint):
        # Exact paths, no wildcards: the client's patterns would let `*` cross folders.
        return Path(
            snapshot_download(
                release.repo_id,
                revision=release.commit,
                allow_patterns=present,
                endpoint=endpoint,
                token=token,
            )
        )


def read_release_manifest(
    repo_id: str,
    revision: str | None = None,
    *,
    endpoint: str | None = None,
    token: str | None = None,
) -> Manifest:
    """The manifest `hubkit push` published to `repo_id` (the adapter or merged repo) at `revision` (a
    branch, tag or commit; None: the main branch).

    Raises:
        HubError: the repo or revision is missing, or the Hub failed (`hubkit.hub.failures`).
        ReleaseError: the repo has no ``hubkit.json`` (not published by hubkit), or the manifest is invalid
            or from a newer hubkit.
    """
    where = repo_id + (f" at revision {revision}" if revision else "")
    path = download_repo_file(repo_id, MANIFEST_NAME, revision=revision, endpoint=endpoint, token=token)
    if path is None:
        raise ReleaseError(f"{where} has no {MANIFEST_NAME}: it was not published by `hubkit push`")
    try:
        return Manifest.from_file(path)
    # Some field readers (the reward's, a range check) do not name the file: the message does.
    except (ManifestError, RewardSpecError) as e:
        named = str(e) if MANIFEST_NAME in str(e) else f"{MANIFEST_NAME}: {e}"
        raise ReleaseError(f"{where}: {named}") from e


def read_release_reward(
    repo_id: str, revision: str | None = None, *, endpoint: str | None = None, token: str | None = None
) -> RewardSpec:
    """The reward spec a run published to `repo_id` was trained with, equal to the run's own.

    Raises:
        HubError, ReleaseError: as `read_release_manifest`.
        RewardSpecError: the manifest records no reward.
    """
    manifest = read_release_manifest(repo_id, revision, endpoint=endpoint, token=token)
    if manifest.reward is None:
        where = repo_id + (f" at revision {revision}" if revision else "")
        raise RewardSpecError(f"{where}'s {MANIFEST_NAME} records no reward spec")
    return manifest.reward
