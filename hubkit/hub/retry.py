"""Retrying what the Hub fails for a moment: 408, 429, 5xx answers and dropped or refused connections.

huggingface_hub already retries each LFS transfer (batch, PUT, verify) five times over about 23 s, and
hf_xet each Xet request (5 retries from 3 s apart, `HF_XET_CLIENT_RETRY_*`); hubkit retries the steps around it: reading a repo, creating it, a file's whole upload, and the commit
(see `hubkit.publish.commit` for when a commit may be sent again). When the retries run out, the push
stops with one line saying it can simply be run again: nothing half-done is visible on the Hub, and a
rerun sends only what the Hub does not hold yet.

A 429 is the Hub's rate limit: the wait is the Hub's own answer (`RateLimit` with nothing remaining,
`Retry-After`, or its message's "You can retry this action in about N minutes"), waited out with one
line saying until when while it is within the policy's `max_wait`; a longer one stops the step with
`RateLimitedError` naming when to try again.
"""

from __future__ import annotations

import email.utils
import logging
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypeVar

import httpx2
from huggingface_hub.errors import HfHubHTTPError
from huggingface_hub.utils import parse_ratelimit_headers

from hubkit.errors import HubError, HubUnreachableError, RateLimitedError

logger = logging.getLogger(__name__)

T = TypeVar("T")
# The commits the Hub answers per repo per hour before its 429 (undocumented: 128 in the reports of 2025,
# huggingface_hub#3010 and braindecode#947; 256 in its messages of 2026): the lower, to plan by.
HUB_COMMITS_PER_REPO_PER_HOUR = 128
TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    """How often, and how patiently, a step that failed transiently is tried again.

    Args:
        attempts: tries of one step in all (the first included).
        first_delay: seconds before the first retry; doubled after each, up to `max_delay`.
        max_delay: the longest wait between two tries.
        max_wait: the longest a step waits, in all, for the Hub's rate limit to reset (`--max-wait`).
    """

    attempts: int = 4
    first_delay: float = 1.0
    max_delay: float = 8.0
    max_wait: float = 15 * 60.0

    def __post_init__(self) -> None:
        if (
            self.attempts < 1
            or self.first_delay < 0
            or self.max_delay < self.first_delay
            or self.max_wait < 0
        ):
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


# The Hub's words on a commit or creation past its limit: "You can retry this action in about 1 hour",
# "... in about 12 minutes", "... in about an hour".
_RETRY_IN = re.compile(
    r"retry (?:this action )?in (?:about )?(an?|\d+(?:\.\d+)?) (second|minute|hour)s?", re.IGNORECASE
)
_UNIT_SECONDS = {"second": 1, "minute": 60, "hour": 3600}


def hub_words(failure: BaseException) -> str:
    """What the Hub said, on one line (its message, else the client's)."""
    said = getattr(failure, "server_message", None) or str(failure)
    return " ".join(str(said).split())


def rate_limit_wait(failure: BaseException) -> float | None:
    """The seconds a 429 says to wait: its `RateLimit` header when nothing remains, its `Retry-After`
    (seconds or a date), else its message's "retry ... in about N minutes"; None for no 429 or no word."""
    if not isinstance(failure, HfHubHTTPError) or failure.response is None:
        return None
    if failure.response.status_code != 429:
        return None
    headers = failure.response.headers
    info = parse_ratelimit_headers(headers)
    if info is not None and info.remaining == 0:
        return float(info.reset_in_seconds)
    retry_after = (headers.get("Retry-After") or "").strip()
    if retry_after.isdigit():
        return float(retry_after)
    if retry_after:
        try:  # an HTTP date
            return max(
                0.0, (email.utils.parsedate_to_datetime(retry_after) - datetime.now(UTC)).total_seconds()
            )
        except (TypeError, ValueError):
            pass  # neither: the message may still say
    match = _RETRY_IN.search(hub_words(failure))
    if match is None:
        return None
    amount = 1.0 if match.group(1).lower() in ("a", "an") else float(match.group(1))
    return amount * _UNIT_SECONDS[match.group(2).lower()]


def clock(moment: datetime) -> str:
    """A moment as the user reads it: "15:42:10 UTC"."""
    return moment.strftime("%H:%M:%S UTC")


def wait_out_rate_limit(
    failure: BaseException, policy: RetryPolicy, waited: float, what: str
) -> float | None:
    """Wait as the Hub's 429 says, when it says (else None: not a rate limit with a wait); the seconds this
    step (`what`) has waited for rate limits, `waited` before and this wait, which `policy.max_wait` bounds.

    Raises:
        RateLimitedError: the wait would pass `max_wait`.
    """
    seconds = rate_limit_wait(failure)
    if seconds is None or seconds <= 0:
        return None
    until = datetime.now(UTC) + timedelta(seconds=seconds)
    if waited + seconds > policy.max_wait:
        refusal = f"the Hub rate-limited {what} (HTTP 429: {hub_words(failure)})"
        raise RateLimitedError(
            f"{refusal}: it takes requests again at {clock(until)}, later than --max-wait "
            f"({policy.max_wait:g} s) allows; run the push again then",
            until=until,
            refusal=refusal,
        )
    logger.warning(
        "%s: the Hub's rate limit (%s); waiting until %s (%g s)",
        what,
        hub_words(failure),
        clock(until),
        seconds,
    )
    time.sleep(seconds)
    return waited + seconds


def gave_up(what: str, endpoint: str, error: BaseException, attempts: int) -> HubError:
    """The one-line error of a push whose retries ran out (a 429's says it was the Hub's rate limit)."""
    if isinstance(error, HubFailure) and failure_status(error) == 429:
        return RateLimitedError(
            f"the Hub rate-limited {what} ({attempts} tries, HTTP 429: {hub_words(error)}) without saying "
            "until when: wait a few minutes and run the push again, it sends only what the Hub does not have yet"
        )
    return HubUnreachableError(
        f"{endpoint} kept failing while {what} ({describe(error)}, {attempts} tries): nothing half-done is "
        "visible on the Hub; run the push again, it sends only what the Hub does not have yet"
    )


def wait_to_try_again(
    cause: HubFailure,
    policy: RetryPolicy,
    delays: Iterator[float],
    waited: float,
    what: str,
    endpoint: str,
    doing: str = "retrying",
) -> float:
    """Wait before the next try after the transient `cause`: out the Hub's rate limit (`waited`: the seconds
    waited on it so far, returned with this wait's), else the policy's next delay.

    Raises:
        RateLimitedError, HubUnreachableError: the wait or the tries ran out (`gave_up`).
    """
    rate_waited = wait_out_rate_limit(cause, policy, waited, what)
    if rate_waited is not None:
        return rate_waited
    delay = next(delays, None)
    if delay is None:
        raise gave_up(what, endpoint, cause, policy.attempts) from cause
    logger.warning("%s failed (%s); %s in %g s", what, describe(cause), doing, delay)
    time.sleep(delay)
    return waited


def with_retries(call: Callable[[], T], policy: RetryPolicy, what: str, endpoint: str) -> T:
    """`call()` (a step safe to repeat), tried again after each transient failure as `policy` says; `what`
    names the step in the log and the error ("uploading checkpoints/.../adapter_model.safetensors").

    Raises:
        HubUnreachableError: the failures were transient and the tries ran out.
        RateLimitedError: the Hub's rate limit resets later than `policy.max_wait` allows.
        Exception: a failure that is not transient, as `call` raised it.
    """
    delays = policy.delays()
    waited = 0.0
    while True:
        try:
            return call()
        except Exception as error:
            cause = transient_cause(error)
            if cause is None:
                raise
            waited = wait_to_try_again(cause, policy, delays, waited, what, endpoint)
