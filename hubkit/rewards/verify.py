"""A pool of math-verify worker processes that cannot stall the caller.

math-verify must not run in the caller's process: its ``signal.alarm`` timeouts raise off the main thread
(Gradio handlers, verl's reward threads), they cancel any outer alarm (pytest-timeout, a trainer's
watchdog), and an alarm cannot interrupt a long computation in C (a huge power in sympy). So answers are
checked in spawned worker processes, each answer with a whole-second budget: the worker's own
math-verify timeouts use it, and the parent kills a worker still busy `grace_s` after the budget,
scores that answer 0 and starts a replacement. Nothing a completion contains can make `check` raise
or wait longer than its budget.

Workers are fresh interpreters (``python -m hubkit.rewards.verify_worker``) talking over a socket pair
with `multiprocessing.connection`. That is what the ``spawn`` start method does, minus one step:
``multiprocessing``'s spawn re-runs the caller's ``__main__`` file in every worker, which breaks any
training script without an ``if __name__ == "__main__"`` guard. The pool waits on all workers at once
(`multiprocessing.connection.wait`) rather than using `concurrent.futures`, because a stuck worker must
be killed on its own without losing the others.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path

from hubkit.errors import RewardSpecError
from hubkit.rewards import verify_worker

logger = logging.getLogger(__name__)

# How long a freshly spawned worker may take to import math-verify (sympy) before it is replaced.
_STARTUP_TIMEOUT_S = 120.0


@dataclass
class _Worker:
    """One worker process and what it is doing (mutable: owned by the pool alone)."""

    process: subprocess.Popen[bytes]
    conn: Connection
    ready: bool = False
    item: int | None = None  # index of the answer in flight
    started_at: float = 0.0  # when the item (or, before ready, the process) started


def _stop(worker: _Worker, *, graceful: bool = True) -> None:
    """End a worker and reap it: ask it to exit, then terminate, then kill; or kill at once (not `graceful`).

    A stuck worker is killed without asking: it holds nothing worth cleaning up, and SIGTERM waits.
    """
    if graceful:
        with contextlib.suppress(OSError, ValueError):  # the pipe is already gone: the process is dying
            worker.conn.send(None)
        with contextlib.suppress(subprocess.TimeoutExpired):
            worker.process.wait(timeout=1.0)
        if worker.process.poll() is None:
            worker.process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.process.wait(timeout=1.0)
    if worker.process.poll() is None:
        worker.process.kill()
        worker.process.wait()
    worker.conn.close()


def _stop_all(workers: list[_Worker]) -> None:
    for worker in workers:
        _stop(worker)
    workers.clear()


class MathVerifier:
    """Checks answers against gold answers with math-verify in a pool of spawned processes.

    Use it as a context manager, or call `close()`; it is also closed when garbage-collected or at exit.

    Args:
        num_workers: worker processes (each holds sympy: about 100 MB).
        timeout_s: whole seconds one answer may take (math-verify accepts only integers).
        grace_s: how long after `timeout_s` a busy worker is killed.

    Raises:
        RewardSpecError: math-verify is not installed, or the limits are not positive.
    """

    def __init__(self, num_workers: int = 2, timeout_s: int = 2, grace_s: float = 0.5) -> None:
        if importlib.util.find_spec("math_verify") is None:
            raise RewardSpecError("math_correctness needs math-verify: pip install 'hubkit[rewards]'")
        if num_workers < 1 or not isinstance(timeout_s, int) or timeout_s < 1:
            raise RewardSpecError(
                f"MathVerifier needs num_workers >= 1 and a whole number of seconds >= 1 as timeout_s, "
                f"got num_workers={num_workers}, timeout_s={timeout_s!r}"
            )
        self.num_workers = num_workers
        self.timeout_s = timeout_s
        self.grace_s = grace_s
        self.restarts = 0  # workers replaced after an overrun or a crash (for logging and tests)
        self._lock = threading.Lock()  # one batch at a time: web apps call from several threads
        self._workers: list[_Worker] = []
        self._finalizer = weakref.finalize(self, _stop_all, self._workers)
        for _ in range(num_workers):
            self._workers.append(self._spawn())

    def _spawn(self) -> _Worker:
        parent_sock, child_sock = socket.socketpair()
        # The worker must import this hubkit even when it is not installed (a source checkout).
        package_root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        process = subprocess.Popen(
            [sys.executable, "-m", "hubkit.rewards.verify_worker", str(child_sock.fileno())],
            pass_fds=(child_sock.fileno(),),
            stdin=subprocess.DEVNULL,
            env=env,
        )
        child_sock.close()  # the child holds its own copy; ours would keep EOF from arriving
        return _Worker(process=process, conn=Connection(parent_sock.detach()), started_at=time.monotonic())

    def _replace(self, worker: _Worker, reason: str) -> None:
        logger.warning("math-verify worker %s (pid %s); starting a new one", reason, worker.process.pid)
        _stop(worker, graceful=False)
        self._workers[self._workers.index(worker)] = self._spawn()
        self.restarts += 1

    def check(self, predictions: Sequence[str | None], golds: Sequence[str]) -> list[float]:
        """1.0 or 0.0 per prediction (an answer body, e.g. the content of the last ``\\boxed{}``) against its
        gold answer body, in order. A None prediction (no answer) scores 0 without a worker; an answer that
        times out, crashes its worker or cannot be parsed scores 0.0.

        Raises:
            ValueError: the lengths differ, or the verifier is closed.
            RewardSpecError: a worker cannot even start (math-verify broken in this environment).
        """
        if len(predictions) != len(golds):
            raise ValueError(f"{len(predictions)} predictions for {len(golds)} gold answers")
        with self._lock:
            if not self._finalizer.alive:
                raise ValueError("this MathVerifier is closed")
            return self._check(predictions, golds)

    def _check(self, predictions: Sequence[str | None], golds: Sequence[str]) -> list[float]:
        scores = [0.0] * len(predictions)
        pending = deque(i for i, p in enumerate(predictions) if p is not None and p.strip())
        budget = self.timeout_s + self.grace_s
        while pending or any(w.item is not None for w in self._workers):
            now = time.monotonic()
            for worker in self._workers:
                if worker.ready and worker.item is None and pending:
                    index = pending.popleft()
                    worker.item, worker.started_at = index, now
                    try:
                        worker.conn.send((index, predictions[index], golds[index], self.timeout_s))
                    except OSError:
                        worker.item = None  # scored 0 below by the replacement path
                        self._replace(worker, "could not take work")
            self._wait_and_collect(scores, budget)
        return scores

    def _wait_and_collect(self, scores: list[float], budget: float) -> None:
        """Wait for the next message or deadline, record results, replace overrun or dead workers."""
        now = time.monotonic()
        deadlines = [
            w.started_at + (budget if w.ready else _STARTUP_TIMEOUT_S)
            for w in self._workers
            if w.item is not None or not w.ready
        ]
        timeout = max(0.0, min(deadlines) - now) if deadlines else None
        for conn in wait([w.conn for w in self._workers], timeout=timeout):
            worker = next(w for w in self._workers if w.conn is conn)
            try:
                message = conn.recv()
            except (EOFError, OSError):
                if not worker.ready:
                    # Not a bad completion but a broken environment: retrying would spin forever.
                    self._finalizer()  # stop every worker; later calls say the verifier is closed
                    raise RewardSpecError(
                        "a math-verify worker exited while starting: check that "
                        "`python -c 'import math_verify'` works in this environment"
                    ) from None
                self._replace(worker, "exited")  # its item keeps its 0.0
                continue
            if message == verify_worker.READY:
                worker.ready = True
            else:
                index, score = message
                scores[index] = score
                worker.item = None
        now = time.monotonic()
        for worker in list(self._workers):
            if worker.item is not None and now - worker.started_at > budget:
                self._replace(worker, f"overran its {self.timeout_s} s budget")
            elif not worker.ready and now - worker.started_at > _STARTUP_TIMEOUT_S:
                self._replace(worker, "did not start")

    @property
    def pids(self) -> list[int]:
        """Process ids of the current workers."""
        return [w.process.pid for w in self._workers]

    def close(self) -> None:
        """Stop the workers (idempotent)."""
        with self._lock:
            self._finalizer()

    def __enter__(self) -> MathVerifier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
