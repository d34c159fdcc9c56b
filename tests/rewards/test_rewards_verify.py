"""math_correctness and its worker pool: real math-verify in real worker processes."""

import math
import os
import signal
import threading
import time

import pytest

from hubkit.errors import RewardSpecError
from hubkit.rewards.components import last_boxed, length_penalty, math_correctness
from hubkit.rewards.verify import MathVerifier
from tests.support.rewards import ADVERSARIAL_COMPLETIONS

TIMEOUT_S = 1
GRACE_S = 0.5


@pytest.fixture(scope="module")
def verifier():
    with MathVerifier(num_workers=2, timeout_s=TIMEOUT_S, grace_s=GRACE_S) as pool:
        pool.check(["1", "2"], ["1", "2"])  # wait until both workers are up
        yield pool


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is gone for our purposes once reaped, which _stop does.
    return True


def test_last_boxed():
    assert last_boxed(r"so \boxed{3} or rather \boxed{\frac{1}{2}}.") == r"\frac{1}{2}"
    assert last_boxed(r"\boxed{\{1, 2\}}") == r"\{1, 2\}"
    assert last_boxed("no box, the answer is 5") is None
    assert last_boxed(r"\boxed{3} then truncated \boxed{\frac{1}{") is None  # an unclosed last box
    assert last_boxed(r"\boxed{}") == ""


def test_length_penalty_counts_tokens():
    assert length_penalty([0, 7500, 15000], 15000) == [0.0, -0.5, -1.0]
    with pytest.raises(ValueError, match="positive"):
        length_penalty([1], 0)


def test_math_correctness_typical(verifier):
    cases = [  # (completion, gold, expected)
        (r"Thus \boxed{72}.", "72", 1.0),
        (r"\boxed{\frac{5}{6}}", r"\frac{5}{6}", 1.0),
        (r"\boxed{0.5}", r"\frac12", 1.0),
        (r"\boxed{(1,2]}", "(1,2]", 1.0),  # gold intervals parse because gold is wrapped in \boxed{}
        (r"\boxed{[1,2)}", "(1,2]", 0.0),
        (r"\boxed{\{3,2,1\}}", r"\{1,2,3\}", 1.0),
        (r"\boxed{\frac{1}{\sqrt{2}}}", r"\frac{\sqrt{2}}{2}", 1.0),
        (r"\boxed{\pi}", r"\pi", 1.0),
        (r"\boxed{x^2+2x+1}", "(x+1)^2", 1.0),
        (r"\boxed{71}", "72", 0.0),
        ("The answer is 72.", "72", 0.0),  # no box, no answer
        (r"\boxed{1} first, finally \boxed{2}", "1", 0.0),  # the last box counts
        (r"\boxed{}", "72", 0.0),
        (r"\boxed{72}", r"$\boxed{72}$", 1.0),  # gold that already carries a box
    ]
    scores = math_correctness([c for c, _, _ in cases], [g for _, g, _ in cases], verifier=verifier)
    assert scores == [e for _, _, e in cases]


def test_adversarial_batch_scores_zero_within_its_budget(verifier):
    golds = ["1"] * len(ADVERSARIAL_COMPLETIONS)
    start = time.monotonic()
    scores = math_correctness(ADVERSARIAL_COMPLETIONS, golds, verifier=verifier)
    elapsed = time.monotonic() - start
    # Each answer gets at most TIMEOUT_S + GRACE_S on one of two workers.
    budget = math.ceil(len(ADVERSARIAL_COMPLETIONS) / 2) * (TIMEOUT_S + GRACE_S) + 1.0
    assert scores == [0.0] * len(ADVERSARIAL_COMPLETIONS)
    assert elapsed < budget, f"adversarial batch took {elapsed:.1f} s, budget {budget:.1f} s"
    # The pool still works afterwards.
    assert verifier.check(["3"], ["3"]) == [1.0]


def test_a_stuck_worker_is_killed_and_replaced(verifier):
    stuck = verifier.pids[0]
    os.kill(stuck, signal.SIGSTOP)  # stands for a computation no alarm can interrupt
    restarts = verifier.restarts
    start = time.monotonic()
    scores = verifier.check(["5", "6", "7"], ["5", "6", "7"])
    elapsed = time.monotonic() - start
    assert scores[0] == 0.0  # the first answer went to the stuck worker
    assert scores[1:] == [1.0, 1.0]
    assert elapsed < TIMEOUT_S + GRACE_S + 2.0  # slack for a loaded machine
    assert verifier.restarts == restarts + 1
    assert stuck not in verifier.pids and not _alive(stuck)
    assert verifier.check(["8", "9"], ["8", "9"]) == [1.0, 1.0]  # the replacement works


def test_works_off_the_main_thread_and_keeps_outer_alarms():
    # In-process math-verify raises off the main thread and cancels the caller's SIGALRM timer.
    previous = signal.signal(signal.SIGALRM, lambda *_: None)  # a harmless timer if it ever fires
    signal.setitimer(signal.ITIMER_REAL, 60)
    try:
        with MathVerifier(num_workers=1, timeout_s=1) as pool:
            results = []
            thread = threading.Thread(target=lambda: results.append(pool.check(["0.5"], [r"\frac{1}{2}"])))
            thread.start()
            thread.join(timeout=60)
            pids = pool.pids
        assert results == [[1.0]]
        assert signal.getitimer(signal.ITIMER_REAL)[0] > 0  # our timer is still running
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert not any(_alive(pid) for pid in pids)  # closed cleanly, no stray processes
    with pytest.raises(ValueError, match="closed"):
        pool.check(["1"], ["1"])


def test_a_worker_that_cannot_start_is_a_clear_error(tmp_path, monkeypatch):
    # A math_verify that fails to import, first on the workers' path: the environment is broken.
    (tmp_path / "math_verify.py").write_text("raise ImportError('broken install')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    pool = MathVerifier(num_workers=1, timeout_s=1)
    pids = pool.pids
    with pytest.raises(RewardSpecError, match="exited while starting"):
        pool.check(["1"], ["1"])
    assert not any(_alive(pid) for pid in pids)
    with pytest.raises(ValueError, match="closed"):
        pool.check(["1"], ["1"])
