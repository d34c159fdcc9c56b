"""Retrying what the Hub fails for a moment: 408, 429, 5xx answers and dropped or refused connections.

huggingface_hub already retries each LFS transfer (batch, PUT, verify) five times over about 23 s, and
hf_xet each Xet request (5 retries from 3 s apart, `HF_XET_CLIENT_RETRY_*`); hubkit retries the steps around it: reading a repo, creating it, a file's whole upload, and the commit
(see `hubkit.publish.commit` for when a commit may be sent again). When the retries run out, the push
stops with one line saying it can simply be run again: nothing half-done is visible on the Hub, and a
rerun sends only what the Hub does not hold yet.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import httpx2
from huggingface_hub.errors import HfHubHTTPError

from hubkit.errors import HubUnreachableError

logger = logging.getLogger(__name__)

T = TypeVar("T")
TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    """How often, and how patiently, a step that failed transiently is tried again.

    Args:
        attempts: tries of one step in all (the first included).
        first_delay: seconds before the first retry; doubled after each, up to `max_delay`.
        max_delay: the longest wait between two tries.
    """

    attempts: int = 4
    first_delay: float = 1.0
    max_delay: float = 8.0

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.first_delay < 0 or self.max_delay < self.first_delay:
            raise ValueError(f"invalid retry policy {self}")

    def delays(self) -> Iterator[float]:
        """The waits before the second, third ... try."""
        delay = self.first_delay
        for _ in range(self.attempts - 1):
            yield delay
            delay = min(self.max_delay, delay * 2)


DEFAULT_RETRY = RetryPolicy()
SINGLE_TRY = RetryPolicy(attempts=1)
# How hf_xet words a request it gave up on: "Server error: Request error: HTTP status server error (503
# Service Unavailable), domain: …"; a connection that failed names no status.
_XET_STATUS = re.compile(r"HTTP status (?:client|server) error \((\d{3})")


class XetTransferError(Exception):
    """A Xet transfer hf_xet gave up on (it raises a builtin ConnectionError with its words), with the
    HTTP status it last got, or None when the connection itself failed."""

    def __init__(self, message: str, status: int | None) -> None:
        super().__init__(message)
        self.status = status


def _xet_failure(error: BaseException) -> XetTransferError | None:
    if type(error) is not ConnectionError:  # hf_xet's; httpx2's errors are not builtin ConnectionErrors
        return None
    match = _XET_STATUS.search(str(error))
    return XetTransferError(str(error), int(match.group(1)) if match else None)


HubFailure = HfHubHTTPError | httpx2.TransportError | XetTransferError


def hub_failure(error: BaseException) -> HubFailure | None:
    """The client's HTTP failure behind `error`: itself, or what it wraps, or None when there is none.

    The one walk of an error's causes: the client's LFS upload threads wrap what failed in a RuntimeError.
    """
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, HfHubHTTPError | httpx2.TransportError | XetTransferError):
            return seen
        if xet := _xet_failure(seen):
            return xet
        seen = seen.__cause__
    return None


def failure_status(failure: HubFailure) -> int | None:
    """The HTTP status of a failure, None for a connection that failed."""
    if isinstance(failure, XetTransferError):
        return failure.status
    if isinstance(failure, HfHubHTTPError):
        return failure.response.status_code if failure.response is not None else None
    return None


def transient_cause(error: BaseException) -> BaseException | None:
    """The transient Hub failure behind `error` (a 408/429/5xx answer, a dropped connection), or None."""
    failure = hub_failure(error)
    if failure is None:
        return None
    status = failure_status(failure)
    return failure if status is None or status in TRANSIENT_STATUSES else None


def describe(error: BaseException) -> str:
    """A short name for a transient failure: "HTTP 503", "ConnectError", "Xet connection"."""
    status = failure_status(error) if isinstance(error, HubFailure) else None
    if status is not None:
        return f"HTTP {status}"
    return "Xet connection" if isinstance(error, XetTransferError) else type(error).__name__


def gave_up(what: str, endpoint: str, error: BaseException, attempts: int) -> HubUnreachableError:
    """The one-line error of a push whose retries ran out."""
    return HubUnreachableError(
        f"{endpoint} kept failing while {what} ({describe(error)}, {attempts} tries): nothing half-done is "
        "visible on the Hub; run the push again, it sends only what the Hub does not have yet"
    )


def with_retries(call: Callable[[], T], policy: RetryPolicy, what: str, endpoint: str) -> T:
    """`call()`, tried again after each transient failure as `policy` says.

    Args:
        call: the step; it must be safe to repeat.
        policy: how often and how patiently.
        what: the step, for the log and the error ("uploading checkpoints/.../adapter_model.safetensors").
        endpoint: the Hub, for the error.

    Returns:
        What `call` returned.

    Raises:
        HubUnreachableError: the failures were transient and the tries ran out.
        Exception: a failure that is not transient, as `call` raised it.
    """
    delays = policy.delays()
    while True:
        try:
            return call()
        except Exception as error:
            cause = transient_cause(error)
            if cause is None:
                raise
            delay = next(delays, None)
            if delay is None:
                raise gave_up(what, endpoint, cause, policy.attempts) from error
            logger.warning("%s failed (%s); retrying in %g s", what, describe(cause), delay)
            time.sleep(delay)
