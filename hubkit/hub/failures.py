"""The client's failures, as one-line `HubkitError`s by condition (`hubkit.errors`): the one mapping of
what huggingface_hub raises, for reads and writes alike.

    with hub_errors(repo_id, endpoint):
        api.create_commit(...)      # a 412 becomes RepoChangedError, a 404 RepoNotFoundError, ...
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from hubkit.errors import (
    AuthError,
    HubkitError,
    HubRefusedError,
    HubUnreachableError,
    RepoChangedError,
    RepoNotFoundError,
)
from hubkit.hub.retry import failure_status, hub_failure


@contextlib.contextmanager
def hub_errors(
    repo_id: str, endpoint: str | None, *, revision: str | None = None, what: str | None = None
) -> Iterator[None]:
    """Raise the client's failures inside as the condition they are, in one line that says what to do.

    Args:
        repo_id: the repo read or written.
        endpoint: the Hub; None names it "the Hub".
        revision: the revision read, named in the message.
        what: the file read, named when the Hub cannot be reached.

    Raises:
        RepoNotFoundError, AuthError, HubUnreachableError, RepoChangedError, HubRefusedError.
    """
    from huggingface_hub.errors import (
        GatedRepoError,
        HFValidationError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    where = repo_id + (f" at revision {revision}" if revision else "")
    hub = endpoint or "the Hub"
    try:
        yield
    except HubkitError:
        raise
    except HFValidationError as e:
        raise RepoNotFoundError(
            f"{repo_id!r} is not a repo id: give OWNER/NAME (letters, digits, '-', '_', '.')"
        ) from e
    except GatedRepoError as e:
        raise AuthError(
            f"{repo_id} is gated: accept its terms on the Hub and use a token that has access"
        ) from e
    except (RepositoryNotFoundError, RevisionNotFoundError) as e:
        raise RepoNotFoundError(
            f"{where} is not on {hub} (or is private): check the repo id, the revision, --endpoint and the token"
        ) from e
    except LocalEntryNotFoundError as e:
        read = f"{what} of {where}" if what else where
        raise HubUnreachableError(
            f"cannot reach {hub} to read {read}: check the connection and --endpoint"
        ) from e
    except Exception as error:
        failure = hub_failure(error)
        if failure is None:
            raise
        status = failure_status(failure)
        if status is None:
            raise HubUnreachableError(
                f"cannot reach {hub} ({type(failure).__name__}): check --endpoint / HF_ENDPOINT"
            ) from error
        if status in (401, 403):
            raise AuthError(
                f"{hub} refused access to {repo_id} (HTTP {status}): set HF_TOKEN or run `hf auth login` "
                "with a token that can read and write it"
            ) from error
        if status == 404:
            raise RepoNotFoundError(
                f"{where} is not on {hub} (or is private): check the repo id and --endpoint"
            ) from error
        if status == 412:
            raise RepoChangedError(
                f"{repo_id} changed on the Hub while pushing; nothing was committed, run the push again"
            ) from error
        said = getattr(failure, "server_message", None) or failure
        raise HubRefusedError(f"{hub} refused a request for {where} (HTTP {status}): {said}") from error
