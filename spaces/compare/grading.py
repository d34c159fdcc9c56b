"""Marks answers correct or not against a reference answer, with math-verify in a child process.

math-verify's timeouts use `signal.alarm`, which works only in a process's main thread, and Gradio runs
handlers in worker threads. So answers are checked in a child process (`python grading.py`: one JSON
request per line on stdin, one JSON answer per line on stdout), in its main thread with math-verify's
own timeouts. The app kills a child that overruns anyway (an alarm cannot interrupt a long computation
in C code) and starts a new one for the next request. The child imports only math-verify: a
`multiprocessing` spawn would import this app (and load the model) again.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

TIMEOUT_S = 3  # per answer; math-verify takes whole seconds
_STARTUP_S = 120.0  # importing sympy on a busy machine

logger = logging.getLogger(__name__)


def check(reference: str, answer: str, timeout_s: int = TIMEOUT_S) -> bool:
    """True when math-verify finds `answer`'s final answer equal to `reference` (never raises).

    The reference is wrapped in `\\boxed{}` so that fractions, intervals and constants parse; the answer is
    parsed as written (its last boxed expression, else its last number or expression).
    """
    from math_verify import parse, verify

    try:
        gold = parse("\\boxed{" + reference + "}", parsing_timeout=timeout_s)
        prediction = parse(answer, parsing_timeout=timeout_s)
        return bool(gold and prediction and verify(gold, prediction, timeout_seconds=timeout_s))
    # sympy can raise anything on odd input (RecursionError, MemoryError): not correct.
    except Exception:
        return False


def _serve() -> None:
    import math_verify  # noqa: F401  (before announcing readiness)

    logging.getLogger("math_verify").setLevel(logging.ERROR)  # it logs whole inputs on timeouts
    print(json.dumps("ready"), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        verdicts = [
            check(request["reference"], answer, request["timeout_s"]) for answer in request["answers"]
        ]
        print(json.dumps(verdicts), flush=True)


class Grader:
    """Checks answers in a child process that it starts, restarts after an overrun, and stops at exit.

    Args:
        timeout_s: whole seconds per answer.
    """

    def __init__(self, timeout_s: int = TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._ready = False
        self._buffer = b""
        atexit.register(self.close)

    def start(self) -> None:
        """Start the child now (it takes seconds to import math-verify) instead of on the first request."""
        with self._lock:
            self._ensure_process()

    def grade(self, reference: str, answers: Sequence[str]) -> list[bool | None]:
        """One verdict per answer: True (correct), False (not), or None (the check ran out of time).

        Args:
            reference: the reference answer, e.g. "42" or "\\frac{1}{2}".
            answers: the answers to check.

        Returns:
            The verdicts, in order.
        """
        with self._lock:
            process = self._ensure_process()
            started = time.monotonic()
            try:
                if not self._ready:
                    self._ready = self._read_line(process, started + _STARTUP_S) == "ready"
                    if not self._ready:
                        raise TimeoutError("math-verify did not start")
                request = {"reference": reference, "answers": list(answers), "timeout_s": self.timeout_s}
                process.stdin.write((json.dumps(request) + "\n").encode())
                process.stdin.flush()
                budget = (self.timeout_s * 3 + 1) * len(answers) + 2.0  # two parses and a verify each
                verdicts = self._read_line(process, time.monotonic() + budget)
                if not isinstance(verdicts, list):
                    raise TimeoutError("math-verify overran its time")
                return [bool(v) for v in verdicts]
            except (OSError, TimeoutError, ValueError) as e:
                logger.warning("answer check failed (%s); restarting the checker", e)
                self._stop()
                return [None] * len(answers)

    def close(self) -> None:
        """Stop the child process."""
        with self._lock:
            self._stop()

    def _ensure_process(self) -> subprocess.Popen[bytes]:
        if self._process is None or self._process.poll() is not None:
            self._process = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            self._ready = False
            self._buffer = b""
        return self._process

    def _read_line(self, process: subprocess.Popen[bytes], deadline: float) -> object:
        """The next JSON line from the child, or None when the deadline passes or the child exits."""
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            readable, _, _ = select.select([process.stdout], [], [], remaining)
            if not readable:
                return None
            chunk = os.read(process.stdout.fileno(), 65536)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def _stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        with contextlib.suppress(OSError):
            process.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=1.0)
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()


if __name__ == "__main__":
    _serve()
