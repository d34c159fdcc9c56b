"""The math-verify worker process: parse and compare answers, one request at a time.

Kept apart from `hubkit.rewards.verify` so that a worker (``python -m hubkit.rewards.verify_worker FD``)
imports only this module, math-verify and the standard library. math-verify's timeouts use ``signal.alarm``, which works only in a process's
main thread and only with whole seconds (research: float timeouts silently return "wrong"); a worker
process runs it in its main thread with integer timeouts. The parent still kills a worker that overruns
(an alarm cannot interrupt a long computation inside C code).
"""

from __future__ import annotations

import logging
from multiprocessing.connection import Connection

# The protocol, both directions over one pipe:
#   parent → worker: (item_index, prediction_latex, gold_latex, timeout_s)   or None to stop
#   worker → parent: ("ready",) once after start-up, then (item_index, score) per request
READY = ("ready",)


def score_answer(prediction: str, gold: str, timeout_s: int) -> float:
    """1.0 when `prediction` and `gold` are equivalent to math-verify, else 0.0 (never raises).

    Both are answer bodies without the ``\\boxed{}`` around them; they are wrapped here so that math-verify
    parses fractions, intervals, sets and constants like ``\\pi`` (a bare ``(1,2]`` parses to nothing).
    """
    from math_verify import parse, verify

    try:
        gold_parsed = parse("\\boxed{" + gold + "}", parsing_timeout=timeout_s)
        prediction_parsed = parse("\\boxed{" + prediction + "}", parsing_timeout=timeout_s)
        if not gold_parsed or not prediction_parsed:
            return 0.0
        # verify is asymmetric: gold first.
        return 1.0 if verify(gold_parsed, prediction_parsed, timeout_seconds=timeout_s) else 0.0
    # math-verify catches its own errors, but sympy can still raise anything (RecursionError on deep
    # nesting, MemoryError on huge numbers); a completion that breaks the checker is scored as not correct.
    except Exception:
        return 0.0


def serve(conn: Connection) -> None:
    """Worker main loop: answer requests on `conn` until it sends None or closes."""
    import math_verify  # noqa: F401  (import before announcing readiness, so the first item's clock is fair)

    # On a timeout math-verify logs a WARNING containing the whole input; keep worker logs quiet.
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    conn.send(READY)
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        if request is None:
            return
        index, prediction, gold, timeout_s = request
        conn.send((index, score_answer(prediction, gold, timeout_s)))


if __name__ == "__main__":
    import sys

    # Started by `hubkit.rewards.verify.MathVerifier` with one inherited socket: its file descriptor.
    serve(Connection(int(sys.argv[1])))
