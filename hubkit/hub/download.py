"""Reading one file of a Hub repo (the base model's card and config, a published run's hubkit.json), with
the client's failures as one-line errors by condition (`hubkit.hub.failures`), or from the client's cache
alone. Imports huggingface_hub when called."""

from __future__ import annotations

from pathlib import Path

from hubkit.hub.failures import hub_errors


def download_repo_file(
    repo_id: str,
    filename: str,
    *,
    revision: str | None,
    endpoint: str | None,
    token: str | None,
    repo_type: str = "model",
) -> Path | None:
    """Download `filename` from a repo (a model's unless `repo_type` says otherwise) into the client's cache;
    its local path, or None when the repo (at that revision: None, the main branch) has no such file.

    Raises:
        HubError: as `hubkit.hub.failures.hub_errors` names the failure.
    """
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import RemoteEntryNotFoundError

    with hub_errors(repo_id, endpoint, revision=revision, what=filename):
        try:
            return Path(
                hf_hub_download(
                    repo_id, filename, repo_type=repo_type, revision=revision, endpoint=endpoint, token=token
                )
            )
        except RemoteEntryNotFoundError:
            return None


def cached_repo_file(repo_id: str, filename: str, *, revision: str | None) -> Path | None:
    """`filename` of a model repo as the client's cache holds it from an earlier download, or None; opens no
    connection (a dry run's view of the base model)."""
    from huggingface_hub import try_to_load_from_cache

    path = try_to_load_from_cache(repo_id, filename, revision=revision)
    return Path(path) if isinstance(path, str) else None
