"""The client's failures, as one-line `HubkitError`s by condition (`hubkit.errors`): the one mapping of
what huggingface_hub raises, for reads and writes alike.

    with hub_errors(repo_id, endpoint):
        api.create_commit(...)      # a 412 becomes RepoChangedError, a 404 RepoNotFoundError, ...
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from hubkit.errors import (
    AuthError,
    HubkitError,
    HubRefusedError,
    HubUnreachableError,
    PlanRequiredError,
    RateLimitedError,
    RepoChangedError,
    RepoNotFoundError,
    StorageQuotaError,
)
from hubkit.hub.retry import clock, failure_status, hub_failure, hub_words, rate_limit_wait

# A 403 that is the account's storage, not its token: "Private repository storage limit reached, please
# upgrade your plan"; or its plan's other limits ("... the most its plan allows: upgrade").
_STORAGE_REFUSAL = re.compile(r"storage|quota", re.IGNORECASE)
_PLAN_REFUSAL = re.compile(r"\bplan\b|upgrade|subscription", re.IGNORECASE)


@contextlib.contextmanager
def hub_errors(
    repo_id: str, endpoint: str | None, *, revision: str | None = None, what: str | None = None
) -> Iterator[None]:
    """Raise the client's failures inside as the condition they are, in one line that says what to do,
    naming `repo_id` (at `revision`, when given) and `endpoint` ("the Hub" for None), and `what` (a file
    read) when the Hub cannot be reached.

    Raises:
        RepoNotFoundError, AuthError, StorageQuotaError, PlanRequiredError, RateLimitedError,
        HubUnreachableError, RepoChangedError, HubRefusedError.
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
        said = hub_words(failure)
        if status == 403 and _STORAGE_REFUSAL.search(said):
            raise StorageQuotaError(
                f"{hub} refused to store {repo_id}: the account's storage quota is full (HTTP 403: {said}): "
                "free space (delete private repos or files you no longer need), upgrade the plan, or push "
                "public repos (without --private)"
            ) from error
        if status == 402 or (status == 403 and _PLAN_REFUSAL.search(said)):
            raise PlanRequiredError(
                f"{hub} refused {where} for the account's plan (HTTP {status}: {said}): upgrade the plan, or "
                "leave out what it does not include"
            ) from error
        if status == 429:
            seconds = rate_limit_wait(failure)
            until = datetime.now(UTC) + timedelta(seconds=seconds) if seconds is not None else None
            when = f"run it again after {clock(until)}" if until else "wait a few minutes and run it again"
            raise RateLimitedError(
                f"{hub} rate-limited a request for {where} (HTTP 429: {said}): {when}", until=until
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
        raise HubRefusedError(f"{hub} refused a request for {where} (HTTP {status}): {said}") from error
