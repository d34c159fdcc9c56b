"""Benchmark hubkit.rewards: aggregation speed, math-verify throughput, adversarial batch wall time.

Each line compares against a baseline measured in the same run:

1. aggregation of 6 prompts × 8 rollouts (2 components, both modes) vs the same math written the way
   TRL writes it (torch tensors reshaped to (groups, generations));
2. math correctness of 48 typical completions through the worker pool vs math-verify called serially
   on the main thread (the fastest unprotected way, unusable off the main thread);
3. an adversarial batch (huge powers, deep nesting, 100k-character strings) vs its timeout budget.

Run: ``python bench/rewards.py``
"""

from __future__ import annotations

import math
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch

from hubkit.rewards.aggregate import aggregate
from hubkit.rewards.components import last_boxed, math_correctness
from hubkit.rewards.verify import MathVerifier

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: tests.support
from tests.support.rewards import ADVERSARIAL_COMPLETIONS

GROUPS, GENERATIONS = 6, 8
WORKERS, TIMEOUT_S, GRACE_S = 2, 1, 0.5


def _best_of(fn, repeats: int) -> float:
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _torch_sum_then_normalize(rewards: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    combined = (rewards * weights).sum(dim=1).view(-1, GENERATIONS)
    mean, std = combined.mean(dim=1, keepdim=True), combined.std(dim=1, keepdim=True)
    return ((combined - mean) / (std + 1e-6)).view(-1)


def _torch_normalize_then_sum(rewards: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    grouped = rewards.view(-1, GENERATIONS, rewards.shape[1])
    z = (grouped - grouped.mean(dim=1, keepdim=True)) / (grouped.std(dim=1, keepdim=True) + 1e-6)
    summed = (z.view(-1, rewards.shape[1]) * weights).sum(dim=1)
    return (summed - summed.mean()) / (summed.std() + 1e-6)


def bench_aggregation() -> None:
    rng = np.random.default_rng(0)
    n = GROUPS * GENERATIONS
    scores = {"math_correctness": rng.integers(0, 2, n).astype(float), "length_penalty": -rng.random(n)}
    weights = {"math_correctness": 1.0, "length_penalty": 0.5}
    groups = [i // GENERATIONS for i in range(n)]
    stacked = torch.tensor(np.stack(list(scores.values()), axis=1))
    w = torch.tensor(list(weights.values()), dtype=stacked.dtype)
    for mode, baseline in (
        ("sum_then_normalize", _torch_sum_then_normalize),
        ("normalize_then_sum", _torch_normalize_then_sum),
    ):
        whiten = mode == "normalize_then_sum"
        ours = _best_of(
            lambda m=mode, b=whiten: aggregate(scores, weights, groups, mode=m, batch_whiten=b), 200
        )
        theirs = _best_of(lambda f=baseline: f(stacked, w), 200)
        print(
            f"aggregation {GROUPS}x{GENERATIONS} {mode}: hubkit {ours * 1e6:.0f} us, "
            f"torch reshape baseline {theirs * 1e6:.0f} us, ratio {ours / theirs:.2f}x"
        )


def _typical_batch(seed: int) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    completions, golds = [], []
    for i in range(GROUPS * GENERATIONS):
        a, b = rng.randint(2, 999), rng.randint(2, 999)
        kind = i % 4
        if kind == 0:
            gold, answer = str(a + b), str(a + b + rng.choice([0, 0, 1]))
        elif kind == 1:
            gold, answer = rf"\frac{{{a}}}{{{b}}}", rf"\frac{{{2 * a}}}{{{2 * b}}}"
        elif kind == 2:
            gold, answer = f"({a},{a + b}]", f"({a},{a + b}]"
        else:
            gold, answer = rf"{a}\sqrt{{2}}", rf"\sqrt{{{2 * a * a}}}"
        reasoning = " ".join(f"Step {k}: combine the terms carefully." for k in range(40))
        completions.append(f"{reasoning} So the answer is \\boxed{{{answer}}}.")
        golds.append(gold)
    return completions, golds


def _serial_math_verify(completions: list[str], golds: list[str]) -> list[float]:
    from math_verify import parse, verify

    scores = []
    for completion, gold in zip(completions, golds, strict=True):
        answer = last_boxed(completion)
        if answer is None:
            scores.append(0.0)
            continue
        g = parse("\\boxed{" + gold + "}", parsing_timeout=TIMEOUT_S)
        p = parse("\\boxed{" + answer + "}", parsing_timeout=TIMEOUT_S)
        scores.append(1.0 if g and p and verify(g, p, timeout_seconds=TIMEOUT_S) else 0.0)
    return scores


def bench_correctness(verifier: MathVerifier) -> None:
    # Both sides warm up on one batch and are timed on another they have not seen: math-verify caches
    # parses, and training rarely repeats a completion. Pool and main thread keep separate caches.
    warm, timed = _typical_batch(1), _typical_batch(2)
    _serial_math_verify(*warm)
    math_correctness(*warm, verifier=verifier)
    start = time.perf_counter()
    pool_scores = math_correctness(*timed, verifier=verifier)
    pool_s = time.perf_counter() - start
    start = time.perf_counter()
    serial_scores = _serial_math_verify(*timed)
    serial_s = time.perf_counter() - start
    n = len(timed[0])
    print(
        f"math correctness, {n} typical completions: pool ({WORKERS} workers) {n / pool_s:.0f}/s "
        f"({pool_s * 1e3:.0f} ms), serial main thread {n / serial_s:.0f}/s ({serial_s * 1e3:.0f} ms), "
        f"speed-up {serial_s / pool_s:.2f}x, same verdicts: {pool_scores == serial_scores}"
    )


def bench_adversarial(verifier: MathVerifier) -> None:
    adversarial = list(ADVERSARIAL_COMPLETIONS)
    budget = math.ceil(len(adversarial) / WORKERS) * (TIMEOUT_S + GRACE_S)
    restarts = verifier.restarts
    start = time.perf_counter()
    scores = math_correctness(adversarial, ["1"] * len(adversarial), verifier=verifier)
    elapsed = time.perf_counter() - start
    print(
        f"adversarial batch of {len(adversarial)}: {elapsed:.2f} s against a budget of {budget:.1f} s "
        f"(ratio {elapsed / budget:.2f}), all scored 0: {scores == [0.0] * len(adversarial)}, "
        f"workers replaced: {verifier.restarts - restarts}"
    )


def main() -> None:
    bench_aggregation()
    with MathVerifier(num_workers=WORKERS, timeout_s=TIMEOUT_S, grace_s=GRACE_S) as verifier:
        bench_correctness(verifier)
        bench_adversarial(verifier)


if __name__ == "__main__":
    main()
