"""One file of a Hub repo, downloaded with errors that say what to do (the base model's card and config,
a published run's hubkit.json). Imports huggingface_hub when called."""

from __future__ import annotations

from pathlib import Path

from hubkit.errors import HubkitError


def download_repo_file(
    repo_id: str,
    filename: str,
    *,
    revision: str | None,
    endpoint: str | None,
    token: str | None,
    error: type[HubkitError],
) -> Path | None:
    """Download `filename` from a model repo into the client's cache.

    Args:
        repo_id: "owner/name".
        filename: the file's path in the repo.
        revision: a branch, tag or commit; default the main branch.
        endpoint: the Hub; default ``HF_ENDPOINT``, else huggingface.co.
        token: for private or gated repos.
        error: the `HubkitError` subclass to raise, so that callers keep their own error kind.

    Returns:
        The local path, or None when the repo (at that revision) has no such file.

    Raises:
        error: the repo is gated, missing or private, the revision is missing, or the Hub cannot be reached.
    """
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import (
        GatedRepoError,
        LocalEntryNotFoundError,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    where = repo_id + (f" at revision {revision}" if revision else "")
    hub = endpoint or "the Hub"
    try:
        return Path(hf_hub_download(repo_id, filename, revision=revision, endpoint=endpoint, token=token))
    except GatedRepoError as e:
        raise error(f"{repo_id} is gated: accept its terms on the Hub and use a token that has access") from e
    except (RepositoryNotFoundError, RevisionNotFoundError) as e:
        raise error(
            f"{where} is not on {hub} (or is private): check the repo id, the revision, --endpoint and the token"
        ) from e
    except RemoteEntryNotFoundError:
        return None
    except LocalEntryNotFoundError as e:
        raise error(
            f"cannot reach {hub} to read {filename} of {where}: check the connection and --endpoint"
        ) from e
