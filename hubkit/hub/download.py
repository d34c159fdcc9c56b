"""Reading a Hub repo's files with errors that say what to do: one file (the base model's card and config, a
published run's hubkit.json) through `download_repo_file`, and the one mapping of the client's read
failures to one-line errors (`read_errors`), which a multi-file download uses too. Imports huggingface_hub
when called."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from hubkit.errors import HubkitError


@contextlib.contextmanager
def read_errors(
    repo_id: str,
    *,
    revision: str | None,
    endpoint: str | None,
    error: type[HubkitError],
    what: str | None = None,
) -> Iterator[None]:
    """The client's failures to read `repo_id` (at `revision`), as one-line errors of the caller's kind.

    Args:
        repo_id: the repo read.
        revision: the revision read, named in the message.
        endpoint: the Hub; None names it "the Hub".
        error: the `HubkitError` subclass to raise.
        what: the file being read, named when the Hub cannot be reached.

    Raises:
        error: the repo is gated, missing or private, the revision is missing, the Hub cannot be reached or
            refused the read.
    """
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        HFValidationError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    where = repo_id + (f" at revision {revision}" if revision else "")
    hub = endpoint or "the Hub"
    try:
        yield
    except HFValidationError as e:
        raise error(f"{repo_id!r} is not a repo id: give OWNER/NAME (letters, digits, '-', '_', '.')") from e
    except GatedRepoError as e:
        raise error(f"{repo_id} is gated: accept its terms on the Hub and use a token that has access") from e
    except (RepositoryNotFoundError, RevisionNotFoundError) as e:
        raise error(
            f"{where} is not on {hub} (or is private): check the repo id, the revision, --endpoint and the token"
        ) from e
    except LocalEntryNotFoundError as e:
        read = f"{what} of {where}" if what else where
        raise error(f"cannot reach {hub} to read {read}: check the connection and --endpoint") from e
    except HfHubHTTPError as e:
        raise error(f"{hub} refused to serve {where} ({e}): check the token, then retry") from e


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
        error: as `read_errors`.
    """
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import RemoteEntryNotFoundError

    with read_errors(repo_id, revision=revision, endpoint=endpoint, error=error, what=filename):
        try:
            return Path(hf_hub_download(repo_id, filename, revision=revision, endpoint=endpoint, token=token))
        except RemoteEntryNotFoundError:
            return None
