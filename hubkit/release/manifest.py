"""What a published release holds, read back from the Hub: its manifest (``hubkit.json``, as data) and the
reward it was trained with. Nothing from the repo is executed."""

from __future__ import annotations

from hubkit.errors import ManifestError, ReleaseError, RewardSpecError
from hubkit.hub.download import download_repo_file
from hubkit.rewards.spec import RewardSpec
from hubkit.runs.manifest import MANIFEST_NAME, Manifest


def read_release_manifest(
    repo_id: str,
    revision: str | None = None,
    *,
    endpoint: str | None = None,
    token: str | None = None,
) -> Manifest:
    """The manifest `hubkit push` published to `repo_id`.

    Args:
        repo_id: the adapter (or merged) repo, "owner/name".
        revision: a branch, tag or commit; default the main branch.
        endpoint: the Hub; default ``HF_ENDPOINT``, else huggingface.co.
        token: for a private repo.

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
    except ManifestError as e:
        raise ReleaseError(f"{where}: {e}") from e


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
