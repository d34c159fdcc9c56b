"""huggingface.co's limits as server policies: rate limits, storage quota, Space hosting by plan.

Each number is production's for the account's plan, with its source; `HubLimits` changes any of them
(None turns one off), `HubLimits.off()` turns all off (`hubkit hub serve --limit NAME=VALUE`, `--no-limits`).
The server's administrator (`--token`, or everyone on an open Hub) has the plan `unlimited` unless
given one (`--plan free`): no quota, only the commits per repository; a users file gives each user a plan.

- API calls per 5-minute fixed window, per account (anonymous callers: per IP address), in two buckets:
  "api" (`/api/...` and the git LFS batch) and "resolvers" (`/resolve/`): free 1,000 / 5,000, PRO
  2,500 / 12,000, Team 3,000 / 20,000, Enterprise 6,000 / 50,000, anonymous 500 / 3,000 (hub-docs
  `docs/hub/rate-limits.md`, table of September 2025). Every answer in a bucket carries the
  `RateLimit` and `RateLimit-Policy` headers of the IETF draft, as that page shows; past the quota, 429.
- Commits per repository per sliding hour: 256 (the number in the Hub's 429 messages of 2026; 128 in
  2025: huggingface_hub#3010, braindecode#947). Production does not document it ("Granular user action
  rate limits"); its message is quoted from those reports. A commit counts when it is asked for, before
  its content is checked, so a refused one counts too.
- Repository creations per account per hour: 100 for every plan. Production rate-limits creation but documents no
  number (same page); 100 is this server's choice, and its message follows the commits' one.
- Private storage per account: free 100 GB, PRO / Team / Enterprise 1 TB (hub-docs `storage-limits.md`);
  a commit or preupload that would pass it is refused with 403 (huggingface_hub#3049 quotes the words).
- Spaces (since 2026-07, hub-docs `spaces-overview.md`, `spaces-zerogpu.md`): a free account may not
  create a Space of an SDK other than static on free `cpu-basic` hardware (402, the words quoted in
  agents-course#733 and ed-donner/agents#1469; huggingface_hub 2.4's `create_repo` docstring), except
  on ZeroGPU hardware (`zero-a10g`), at most 2 (PRO 10, Team / Enterprise 50). The Hub's answer past
  the ZeroGPU cap is not public: this server answers 403 in its own words. Paid hardware, which needs
  only billing on the Hub, is accepted.
- A commit of more than 100 files: the Hub recommends at most 100 and has a 60 s timeout per commit
  (`storage-limits.md`) but refuses nothing for the count, so this server logs a warning.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING

from hubkit.localhub.http import errors

if TYPE_CHECKING:
    from hubkit.localhub.storage.repos import Repo

logger = logging.getLogger(__name__)

GB = 1000**3
_UNITS = {"": 1, "b": 1, "kb": 1000, "mb": 1000**2, "gb": GB, "tb": 1000**4}
_UNITS |= {"kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4}
ZERO_GPU_PREFIX = "zero-"  # ZeroGPU hardware flavors: zero-a10g
FREE_SDKS = ("static",)  # the other SDKs run on compute
PLAN_NAMES = ("free", "pro", "team", "enterprise")
# The server's operator (its administrator, by default): no plan, no quota; repos' commit limits still apply.
UNLIMITED = "unlimited"


def parse_size(text: str, what: str = "--max-lfs-size") -> int:
    """Bytes from `50GB`, `16MiB` or `1000`. Raises ValueError naming `what` for anything else."""
    match = re.fullmatch(r"\s*([0-9]+)(\.[0-9]+)?\s*([A-Za-z]*)\s*", text)
    unit = _UNITS.get(match.group(3).lower()) if match else None
    if match is None or unit is None:
        raise ValueError(f"Invalid {what} {text!r}: give bytes, or a size such as 50GB or 16MiB.")
    size = int(match.group(1)) * unit + int(float(match.group(2) or 0) * unit)
    if size < 1:
        raise ValueError(f"Invalid {what} {text!r}: it must be at least one byte.")
    return size


@dataclass(frozen=True)
class Plan:
    """One plan's quotas (None: no limit)."""

    api_calls: int | None
    resolver_calls: int | None
    private_storage: int | None  # bytes
    zero_gpu_spaces: int | None
    paid_spaces: bool  # may create Gradio and Docker Spaces on CPU hardware
    repo_creations: int | None  # per `HubLimits.repo_creation_window`


PRODUCTION_PLANS = {
    "free": Plan(1000, 5000, 100 * GB, 2, False, 100),
    "pro": Plan(2500, 12000, 1000 * GB, 10, True, 100),
    "team": Plan(3000, 20000, 1000 * GB, 50, True, 100),
    "enterprise": Plan(6000, 50000, 1000 * GB, 50, True, 100),
}
NO_QUOTA = Plan(None, None, None, None, True, None)


@dataclass(frozen=True)
class HubLimits:
    """The limits a local Hub enforces; the defaults are production's (see the module docstring).

    Attributes:
        free, pro, team, enterprise: each plan's quotas (`Plan`).
        anonymous_api_calls, anonymous_resolver_calls: per IP address, for requests without a token.
        api_window: seconds of the API calls' fixed window.
        commits_per_repo, commit_window: commits to one repository within a sliding window of seconds.
        repo_creation_window: the sliding window of each plan's `repo_creations` by one account.
        commit_files_warning: a commit of more files than this is logged as a warning.
    """

    free: Plan = PRODUCTION_PLANS["free"]
    pro: Plan = PRODUCTION_PLANS["pro"]
    team: Plan = PRODUCTION_PLANS["team"]
    enterprise: Plan = PRODUCTION_PLANS["enterprise"]
    anonymous_api_calls: int | None = 500
    anonymous_resolver_calls: int | None = 3000
    api_window: float = 300
    commits_per_repo: int | None = 256
    commit_window: float = 3600
    repo_creation_window: float = 3600
    commit_files_warning: int | None = 100

    def __post_init__(self) -> None:
        if min(self.api_window, self.commit_window, self.repo_creation_window) <= 0:
            raise ValueError("The limits' windows must be positive numbers of seconds.")
        counts = [getattr(self, f.name) for f in fields(self) if f.type == "int | None"]
        for plan in (self.free, self.pro, self.team, self.enterprise):
            counts += [plan.api_calls, plan.resolver_calls, plan.private_storage, plan.zero_gpu_spaces]
            counts.append(plan.repo_creations)
        if any(c is not None and c < 0 for c in counts):
            raise ValueError("A limit cannot be negative (give `off` to turn one off).")

    @classmethod
    def off(cls) -> HubLimits:
        """No limit at all (a team's own Hub, or tests of something else)."""
        counts = {f.name: None for f in fields(cls) if f.type == "int | None"}
        return cls(**dict.fromkeys(PLAN_NAMES, NO_QUOTA), **counts)

    def plan(self, name: str) -> Plan:
        """A plan's quotas (`unlimited`: none)."""
        return NO_QUOTA if name == UNLIMITED else getattr(self, name)

    def with_settings(self, spec: str) -> HubLimits:
        """These limits with `NAME=VALUE` settings changed (`,`-separated): a top-level name
        (`commits_per_repo=3`, `commit_window=60`) or `PLAN.NAME` (`free.api_calls=20`,
        `free.paid_spaces=true`); `off` turns a count off; sizes take a unit (`free.private_storage=1GB`).
        Raises ValueError naming an unknown name or a bad value in one line.
        """
        limits = self
        for item in filter(None, (part.strip() for part in spec.split(","))):
            name, sep, value = item.partition("=")
            plan_name, dot, key = name.strip().rpartition(".")
            target = self.plan(plan_name) if dot and plan_name in PLAN_NAMES else limits
            if (
                not sep
                or (dot and plan_name not in PLAN_NAMES)
                or (not dot and key in PLAN_NAMES)
                or key not in {f.name for f in fields(target)}
            ):
                raise ValueError(f"Unknown limit {name!r} in {item!r}: see `hubkit hub serve --help`.")
            value = value.strip().lower()
            try:
                if key == "paid_spaces":
                    if value not in ("true", "false"):
                        raise ValueError
                    parsed: object = value == "true"
                elif value == "off" and not key.endswith("window"):
                    parsed = None
                elif key == "private_storage":
                    parsed = parse_size(value, f"the limit {name}")
                else:
                    parsed = float(value) if key.endswith("window") else int(value)
            except ValueError:
                raise ValueError(f"Invalid value in the limit {item!r}.") from None
            if dot:
                plan = replace(getattr(limits, plan_name), **{key: parsed})
                limits = replace(limits, **{plan_name: plan})
            else:
                limits = replace(limits, **{key: parsed})
        return limits


def _in_about(seconds: float) -> str:
    """The Hub's "in about 1 hour", for any wait."""
    for unit, size in (("hour", 3600), ("minute", 60), ("second", 1)):
        if seconds >= size or unit == "second":
            n = max(1, round(seconds / size))
            return f"in about {n} {unit}{'s' if n > 1 else ''}"
    raise AssertionError  # the loop always returns


def _per(window: float) -> str:
    if window == 3600:
        return "per hour"
    return f"per {window:g} seconds"


def _period(window: float) -> str:
    return f"{window / 60:g} minutes" if window % 60 == 0 else f"{window:g} seconds"


@dataclass
class SlidingCounter:
    """Events per key within a sliding window: `take` records one, unless the key has `limit` already."""

    window: float
    stamps: dict[str, deque[float]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, key: str, limit: int) -> float | None:
        """Record an event; None if it fits, else the seconds until one fits."""
        now = time.monotonic()
        with self.lock:
            stamps = self.stamps.setdefault(key, deque())
            while stamps and stamps[0] <= now - self.window:
                stamps.popleft()
            if len(stamps) >= limit:
                return stamps[0] + self.window - now
            stamps.append(now)
            return None


@dataclass
class FixedWindow:
    """Requests per key in fixed windows of `window` seconds, as the Hub counts API calls."""

    window: float
    counts: dict[str, tuple[float, int]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, key: str) -> tuple[int, float]:
        """Count one request; the count within the current window (this one included) and the seconds
        until the window resets."""
        now = time.monotonic()
        with self.lock:
            start, count = self.counts.get(key, (now, 0))
            if now >= start + self.window:
                start, count = now, 0
            self.counts[key] = (start, count + 1)
            return count + 1, start + self.window - now


def rate_limited(message: str, wait: float) -> errors.HubHTTPError:
    return errors.HubHTTPError(429, message, headers={"Retry-After": str(math.ceil(wait))})


class Limiter:
    """The counters of one running Hub, and the checks the handlers call."""

    def __init__(self, limits: HubLimits) -> None:
        self.limits = limits
        self._api = FixedWindow(limits.api_window)
        self._commits = SlidingCounter(limits.commit_window)
        self._creations = SlidingCounter(limits.repo_creation_window)
        self.commit_sizes = CommitSizes()

    def api_headers(self, bucket: str, key: str, plan: Plan | None) -> tuple[dict[str, str], bool]:
        """Count a request of `bucket` ("api" or "resolvers") by `key` (an account, or an IP address for
        `plan` None); its rate-limit headers, and whether it is over the quota."""
        limits = self.limits
        if bucket == "api":
            quota = plan.api_calls if plan else limits.anonymous_api_calls
        else:
            quota = plan.resolver_calls if plan else limits.anonymous_resolver_calls
        if quota is None:
            return {}, False
        count, reset = self._api.take(f"{bucket}:{key}")
        headers = {
            "RateLimit": f'"{bucket}";r={max(0, quota - count)};t={math.ceil(reset)}',
            "RateLimit-Policy": f'"fixed window";"{bucket}";q={quota};w={math.ceil(limits.api_window)}',
        }
        return headers, count > quota

    def api_refusal(self, bucket: str, headers: dict[str, str]) -> errors.HubHTTPError:
        """The Hub's 429 past the API quota, in its words (quoted from an LFS batch answer of 2025)."""
        quota = headers["RateLimit-Policy"].rsplit("q=", 1)[1].split(";")[0]
        message = (
            f"We had to rate limit you, you hit the quota of {quota} {bucket} requests per "
            f"{_period(self.limits.api_window)} period. Upgrade to a PRO user or Team/Enterprise organization "
            "account (https://hf.co/pricing) to get higher limits. See https://huggingface.co/docs/hub/rate-limits"
        )
        reset = headers["RateLimit"].rsplit("t=", 1)[1]
        return errors.HubHTTPError(429, message, headers={**headers, "Retry-After": reset})

    def check_commit(self, repo_key: str) -> None:
        """Count a commit to a repository. Raises the Hub's 429 past the limit."""
        self._take(self._commits, repo_key, self.limits.commits_per_repo, "repository commits")

    def check_creation(self, account: str, plan: Plan) -> None:
        """Count a repository creation by `account`. Raises 429 past its plan's limit."""
        self._take(self._creations, account, plan.repo_creations, "repository creation")

    @staticmethod
    def _take(counter: SlidingCounter, key: str, limit: int | None, what: str) -> None:
        if limit is None:
            return
        wait = counter.take(key, limit)
        if wait is not None:
            raise rate_limited(
                f"You have exceeded the rate limit for {what} ({limit} "
                f"{_per(counter.window)}). You can retry this action {_in_about(wait)}.",
                wait,
            )


def check_space_creation(plan: Plan, sdk: str, hardware: str | None, zero_gpu_spaces: int) -> None:
    """Refuse a Space the namespace's plan may not host, as the Hub does: 402 for compute on free hardware
    without a subscription, 403 past the ZeroGPU cap (`zero_gpu_spaces`: the namespace's already there)."""
    if sdk in FREE_SDKS:
        return
    if hardware and hardware.startswith(ZERO_GPU_PREFIX):
        cap = plan.zero_gpu_spaces
        if cap is not None and zero_gpu_spaces >= cap:
            raise errors.forbidden(
                f"This account already hosts {zero_gpu_spaces} ZeroGPU Spaces, the most its plan allows "
                f"({cap}): delete one, or upgrade (https://huggingface.co/pro)."
            )
        return
    if hardware in (None, "cpu-basic") and not plan.paid_spaces:
        raise errors.HubHTTPError(
            402,
            "Static Spaces are free for everyone, but hosting Gradio and Docker Spaces on free cpu-basic "
            "requires a PRO subscription. Subscribe at https://huggingface.co/pro",
        )


class CommitSizes:
    """{oid: size} of each commit's files, kept for the last `size` commits read: a commit never changes,
    and a push's many branches would otherwise be listed again at every commit."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._sizes: OrderedDict[tuple[str, str], dict[str, int]] = OrderedDict()
        self._lock = threading.Lock()

    def of(self, repo: Repo, commit: str) -> dict[str, int]:
        key = (str(repo.git.path), commit)
        with self._lock:
            if (sizes := self._sizes.get(key)) is not None:
                self._sizes.move_to_end(key)
                return sizes
        sizes = {entry.oid: entry.size for entry in repo.files(commit).values()}
        with self._lock:
            self._sizes[key] = sizes
            if len(self._sizes) > self._size:
                self._sizes.popitem(last=False)
        return sizes


def private_usage(repos: Iterable[Repo], cache: CommitSizes) -> tuple[int, set[str]]:
    """Bytes of the distinct files at the head of every branch of `repos` (a namespace's private
    repositories), and their oids (so that a commit re-adding one costs nothing more)."""
    sizes: dict[str, int] = {}
    for repo in repos:
        for head in set(repo.git.list_refs("refs/heads/").values()):
            sizes.update(cache.of(repo, head))
    return sum(sizes.values()), set(sizes)


def _human(size: int) -> str:
    for unit, scale in (("TB", 1000**4), ("GB", GB), ("MB", 1000**2), ("kB", 1000)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"


def check_private_storage(plan: Plan, namespace: str, used: int, adding: int) -> None:
    """Refuse to store `adding` more bytes in `namespace`'s private repos past its plan's quota: 403, in
    the Hub's words (huggingface_hub#3049), with the numbers after them."""
    quota = plan.private_storage
    if quota is None or used + adding <= quota:
        return
    words = "Private repository storage limit reached, please upgrade your plan"
    raise errors.HubHTTPError(
        403,
        f"{words}: {namespace} uses {_human(used)} of private storage, this would add {_human(adding)}, "
        f"and its plan allows {_human(quota)}.",
        header_message=words,
    )


def warn_large_commit(limits: HubLimits, repo_id: str, files: int) -> None:
    """Log a commit of more files than the Hub recommends (it answers, but may time out after 60 s)."""
    if limits.commit_files_warning is not None and files > limits.commit_files_warning:
        logger.warning(
            "A commit to %s adds %d files: the Hub recommends at most %d per commit (its commits time "
            "out after 60 s); split it.",
            repo_id,
            files,
            limits.commit_files_warning,
        )
