"""Faults a local Hub injects on purpose, so that the real clients are tested against a flaky Hub.

`Faults` is a set of the local Hub's hooks (`hubkit.localhub.http.hooks`): `LocalHub(root, hooks=Faults(plan))`
in this process, or `serve_faulty.py` for a Hub in a process of its own (the crash faults kill it).
A plan is parsed from a comma-separated list of `name=value` items:

    lfs_503=P[:N]              an upload (an LFS object's PUT or one part's, a Xet xorb) answers 503
    lfs_429=P[:N]              an upload answers 429 with `Retry-After: <retry_after>`
    commit_500_after_lfs=P[:N] a commit naming LFS files, every one of them stored, answers 500; nothing is committed
    drop_mid_upload=P[:N]      an upload's connection is cut after half its body; nothing is stored
    crash_mid_upload=P[:N]     the server process kills itself (SIGKILL) after half an upload's body
    crash_mid_commit=P[:N]     the server process kills itself inside a commit: objects written, branch not moved
    seed=S                     seeds every draw (default 0)
    retry_after=SECONDS        the Retry-After of an injected 429 (default 0)

P is the chance, from 0 to 1, that an eligible request gets the fault; N caps how many times it is
injected (no cap by default): `lfs_503=1:2` fails the first two uploads and no other. The draw
for the n-th eligible request of a fault depends only on (seed, fault, n), so a client that sends the
same requests in the same order meets the same faults. 503 and 429 answers come after the body is
read, as a proxy in front of storage answers.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from hubkit.localhub.http.errors import HubHTTPError
from hubkit.localhub.http.hooks import AbortConnection, HubHooks
from hubkit.localhub.storage.repos import AddLfs, Operation, Repo

logger = logging.getLogger(__name__)

CRASH_FAULTS = ("crash_mid_upload", "crash_mid_commit")
FAULTS = ("lfs_503", "lfs_429", "commit_500_after_lfs", "drop_mid_upload", *CRASH_FAULTS)


@dataclass(frozen=True)
class FaultRule:
    """One fault: the chance per eligible request, and how many times at most (None: no cap)."""

    probability: float
    limit: int | None = None


@dataclass(frozen=True)
class FaultPlan:
    """Which faults to inject, parsed from a spec (see the module docstring)."""

    rules: dict[str, FaultRule] = field(default_factory=dict)
    seed: int = 0
    retry_after: int = 0

    @classmethod
    def parse(cls, spec: str) -> FaultPlan:
        """Parse `lfs_503=0.3,lfs_429=1:2,seed=7`. Raises ValueError naming the bad item."""
        rules: dict[str, FaultRule] = {}
        seed, retry_after = 0, 0
        for item in (part.strip() for part in spec.split(",")):
            if not item:
                continue
            name, sep, value = (s.strip() for s in item.partition("="))
            try:
                if not sep:
                    raise ValueError("expected name=value")
                if name == "seed":
                    seed = int(value)
                elif name == "retry_after":
                    retry_after = int(value)
                    if retry_after < 0:
                        raise ValueError("must be 0 or more seconds")
                elif name in FAULTS:
                    chance, _, cap = value.partition(":")
                    probability = float(chance)
                    limit = int(cap) if cap else None
                    if not 0 <= probability <= 1 or (limit is not None and limit < 0):
                        raise ValueError("the chance must be from 0 to 1 and the cap 0 or more")
                    rules[name] = FaultRule(probability, limit)
                else:
                    raise ValueError(f"unknown fault; known: {', '.join(FAULTS)}, seed, retry_after")
            except ValueError as e:
                raise ValueError(f"Invalid fault {item!r}: {e}.") from None
        return cls(rules, seed, retry_after)

    @property
    def crashes(self) -> bool:
        """Whether the plan can kill the server process."""
        return any(self.rules.get(name, FaultRule(0)).probability > 0 for name in CRASH_FAULTS)


class Faults(HubHooks):
    """The faults of one running Hub (`plan`): draws them, counts what was eligible and what was injected.

    `own_process`: the Hub runs in a process of its own, which the crash faults may kill (a Hub inside
    pytest's process is refused them: ValueError)."""

    def __init__(self, plan: FaultPlan | None = None, own_process: bool = False) -> None:
        self.plan = plan or FaultPlan()
        if self.plan.crashes and not own_process:
            raise ValueError("Crash faults kill the process: serve them with tests/support/serve_faulty.py.")
        self._lock = threading.Lock()
        self._eligible = dict.fromkeys(FAULTS, 0)
        self._injected = dict.fromkeys(FAULTS, 0)

    def draw(self, name: str) -> bool:
        """Whether this eligible request gets fault `name` (counted either way)."""
        rule = self.plan.rules.get(name)
        with self._lock:
            self._eligible[name] += 1
            if rule is None or (rule.limit is not None and self._injected[name] >= rule.limit):
                return False
            # The n-th draw of a fault depends on (seed, fault, n) only: other faults do not shift it.
            chance = random.Random(f"{self.plan.seed}/{name}/{self._eligible[name]}").random()
            if chance >= rule.probability:
                return False
            self._injected[name] += 1
        logger.warning("local Hub: injecting fault %s", name)
        return True

    @property
    def injected(self) -> dict[str, int]:
        """How many times each fault was injected so far."""
        with self._lock:
            return dict(self._injected)

    def stats(self) -> dict:
        """The plan, and eligible and injected counts (what `serve_faulty.py` prints when stopped)."""
        with self._lock:
            return {
                "seed": self.plan.seed,
                "retry_after": self.plan.retry_after,
                "rules": {
                    name: {"probability": rule.probability, "limit": rule.limit}
                    for name, rule in self.plan.rules.items()
                },
                "eligible": dict(self._eligible),
                "injected": dict(self._injected),
            }

    # --- the hooks: where faults strike -------------------------------------------------------------

    def upload(self, body: Iterator[bytes], size: int) -> Iterator[bytes]:
        """A 503 or 429 once the body is read, or the body cut after half its `size` bytes (a drop or a
        crash), or the body whole."""
        for name, status in (("lfs_503", 503), ("lfs_429", 429)):
            if self.draw(name):
                for _ in body:  # read it all, so that the client sees the answer, not a reset
                    pass
                headers = {"Retry-After": str(self.plan.retry_after)} if status == 429 else {}
                raise HubHTTPError(status, f"Fault injected by the local Hub: {status}.", headers=headers)
        crash = self.draw("crash_mid_upload")
        if not crash and not self.draw("drop_mid_upload"):
            return body
        return self._cut(body, size // 2, crash)

    @staticmethod
    def _cut(chunks: Iterator[bytes], keep: int, crash: bool) -> Iterator[bytes]:
        for chunk in chunks:
            if len(chunk) >= keep:
                if keep:
                    yield chunk[:keep]
                break
            keep -= len(chunk)
            yield chunk
        if crash:
            os.kill(os.getpid(), signal.SIGKILL)
        raise AbortConnection

    def commit(self, repo: Repo, operations: Sequence[Operation]) -> None:
        """A 500 for a commit naming LFS files whose objects are all stored (eligible only then)."""
        if _all_lfs_arrived(repo, operations) and self.draw("commit_500_after_lfs"):
            raise HubHTTPError(500, "Fault injected by the local Hub: the commit was not applied.")

    def ref_update(self, repo: Repo) -> None:
        """Between writing a commit's objects and moving its branch: may kill the process."""
        if self.draw("crash_mid_commit"):
            os.kill(os.getpid(), signal.SIGKILL)


def _all_lfs_arrived(repo: Repo, operations: Sequence[Operation]) -> bool:
    """Whether the commit names LFS files and every one of their objects is stored."""
    lfs = [op for op in operations if isinstance(op, AddLfs)]
    stored = [(repo.lfs.size(op.oid), op.size) for op in lfs]
    return bool(lfs) and all(size is not None and want in (None, size) for size, want in stored)
