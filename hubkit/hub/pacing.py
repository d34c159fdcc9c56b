"""Keeping hubkit's API calls within the Hub's window, by the `RateLimit` headers its answers carry.

The Hub counts each account's calls in fixed windows of 5 minutes, in buckets: "api" (`/api/...` and the
git LFS batch: a free account's 1,000) and "resolvers" (`/resolve/` downloads: 5,000), and says in every
answer how many calls are left and when the window resets (`RateLimit: "api";r=41;t=118`, the IETF
draft's headers; hub-docs `rate-limits.md`). huggingface_hub (2.4) waits for that reset only after a 429
on a download or a listing; a push's reads, branch creations and commits would meet the 429 itself.

Every request huggingface_hub sends goes through its one shared `httpx2` client (`get_session`), which
`install` builds with two event hooks besides the library's own: each answer's `RateLimit` is recorded by
endpoint, account (the request's credentials, kept as a hash) and bucket, and each request of a bucket counts one call off what is left; a request finding no
more than `RESERVE` left waits until the window resets, saying until when in one line, as long as the
wait is within `--max-wait`; a longer one stops the push with `RateLimitedError` saying when to rerun.

Xet transfers (hf_xet's own client, to the CAS service) and the LFS PUTs to storage are not API calls:
they carry no bucket and are never held. hf_xet asks the Hub for its write token itself, once per upload
session: hubkit counts that call with `Pacer.take` before each upload it starts.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import httpx2
from huggingface_hub import set_client_factory
from huggingface_hub.utils import parse_ratelimit_headers
from huggingface_hub.utils._http import default_client_factory

from hubkit.errors import RateLimitedError
from hubkit.hub.retry import DEFAULT_RETRY, clock

logger = logging.getLogger(__name__)

# Calls kept back in each window: the account's other clients (a browser, a second push) share it.
RESERVE = 5


def bucket_of(url: httpx2.URL) -> str | None:
    """The Hub's rate-limit bucket of a request, as the Hub counts it: "api", "resolvers", or None."""
    path = url.path
    if path.startswith("/api/"):
        return "api"
    if "/resolve/" in path:
        return "resolvers"
    return "api" if ".git/info/lfs/" in path else None


def account_of(authorization: str | None) -> str:
    """Whose window a request counts against: a digest of its credentials ("" for an anonymous caller). The
    Hub counts each account's calls apart, so one account's spent window never holds another's calls."""
    return hashlib.sha256(authorization.encode()).hexdigest()[:16] if authorization else ""


def origin(url: httpx2.URL | str) -> str:
    """The Hub a window belongs to: its host, and its port when one is named ("127.0.0.1:8000")."""
    url = httpx2.URL(url) if isinstance(url, str) else url
    return f"{url.host}:{url.port}" if url.port else url.host


@dataclass
class Window:
    """One bucket's window as its last answer stated it, less the calls sent since."""

    remaining: int
    resets_at: float  # time.monotonic()


@dataclass
class PaceStats:
    """What the pacing did: the API calls sent per bucket, and its waits."""

    calls: dict[str, int]
    waits: int = 0


class Pacer:
    """The windows of every endpoint's buckets, shared by all of the client's threads."""

    def __init__(self, reserve: int = RESERVE) -> None:
        self.reserve = reserve
        self.max_wait = DEFAULT_RETRY.max_wait
        self.stats = PaceStats(calls={})
        # By (origin, account, bucket).
        self._windows: dict[tuple[str, str, str], Window] = {}
        self._lock = threading.Lock()
        self._waiting_until: dict[tuple[str, str, str], float] = {}

    def before(self, request: httpx2.Request) -> None:
        """Count the request off its bucket's window; wait first when no more than the reserve is left.

        Raises:
            RateLimitedError: the window resets later than `max_wait` allows.
        """
        bucket = bucket_of(request.url)
        if bucket is not None:
            self.take(origin(request.url), account_of(request.headers.get("authorization")), bucket)

    def take(self, host: str, account: str, bucket: str = "api") -> None:
        """Count one call of `bucket` to `host` (an `origin`) by `account` (`account_of`), waiting first as
        `before` does: also for the calls hf_xet makes from its own client (its write token, one per upload
        session), which no hook sees.

        Raises:
            RateLimitedError: the window resets later than `max_wait` allows.
        """
        key = (host, account, bucket)
        while True:
            with self._lock:
                window = self._windows.get(key)
                now = time.monotonic()
                if window is not None and now >= window.resets_at:
                    del self._windows[key]  # a new window: its first answer says what it allows
                    window = None
                if window is None or window.remaining > self.reserve:
                    if window is not None:
                        window.remaining -= 1
                    self.stats.calls[bucket] = self.stats.calls.get(bucket, 0) + 1
                    return
                wait = window.resets_at - now
                announce = self._waiting_until.get(key) != window.resets_at
                self._waiting_until[key] = window.resets_at
                if announce:
                    self.stats.waits += 1
            self._wait(bucket, host, wait, window.remaining, announce)

    def _wait(self, bucket: str, host: str, wait: float, left: int, announce: bool) -> None:
        until = datetime.now(UTC) + timedelta(seconds=wait)
        if wait > self.max_wait:
            refusal = (
                f"the Hub's window of {bucket} calls is spent ({max(left, 0)} left, kept for other clients)"
            )
            raise RateLimitedError(
                f"{refusal} (RateLimit header of {host}); it resets at {clock(until)}, later than "
                f"--max-wait ({self.max_wait:g} s) allows; run the push again then",
                until=until,
                refusal=refusal,
            )
        if announce:
            logger.warning(
                "The Hub's %s calls: %d left in this window (keeping %d back); waiting until %s (%d s) for it "
                "to reset",
                bucket,
                left,
                self.reserve,
                clock(until),
                math.ceil(wait),
            )
        time.sleep(wait)

    def after(self, response: httpx2.Response) -> None:
        """Record the window an answer states (`RateLimit`, with `RateLimit-Policy`)."""
        info = parse_ratelimit_headers(response.headers)
        if info is None:
            return
        request = response.request
        key = (origin(request.url), account_of(request.headers.get("authorization")), info.resource_type)
        resets_at = time.monotonic() + info.reset_in_seconds
        with self._lock:
            window = self._windows.get(key)
            if window is None or resets_at > window.resets_at + 1:  # the first answer of a new window
                self._windows[key] = Window(info.remaining, resets_at)
            else:  # answers arrive out of order: the lowest count is the latest
                window.remaining = min(window.remaining, info.remaining)


PACER = Pacer()
_installed = threading.Lock()
_done = False


def _client_factory() -> httpx2.Client:
    client = default_client_factory()
    client.event_hooks["request"].append(PACER.before)
    client.event_hooks["response"].append(PACER.after)
    return client


def install(max_wait: float | None = None) -> Pacer:
    """Pace every request huggingface_hub sends from now on (once per process), waiting at most `max_wait`
    seconds for a window (None: as it was, the push's default at first)."""
    global _done
    with _installed:
        if not _done:
            set_client_factory(_client_factory)
            _done = True
        if max_wait is not None:
            PACER.max_wait = max_wait
    return PACER
