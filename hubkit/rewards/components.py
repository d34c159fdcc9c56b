"""Framework-free reward components for math: answer correctness and a token-length penalty.

Each component is a pure function over a batch (one value per completion, in order). They know nothing
about TRL or verl; `hubkit.rewards.trl` and `hubkit.integrations.verl_reward` feed them.
"""

from __future__ import annotations

from collections.abc import Sequence

from hubkit.rewards.verify import MathVerifier

_BOXED = "\\boxed"


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` in `text` (braces balanced), or None when there is none
    or the last one is never closed."""
    start = text.rfind(_BOXED + "{")
    if start == -1:
        return None
    body_start = start + len(_BOXED) + 1
    depth = 1
    for i in range(body_start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[body_start:i]
    # The last box is never closed (a truncated completion); an earlier box is not the final answer.
    return None


def _gold_body(gold: str) -> str:
    """A gold answer as a box body: strips a surrounding ``\\boxed{}`` or ``$...$`` if the data has one."""
    gold = gold.strip()
    boxed = last_boxed(gold)
    if boxed is not None:
        return boxed
    return gold.strip("$").strip()


def math_correctness(
    completions: Sequence[str], ground_truths: Sequence[str], *, verifier: MathVerifier
) -> list[float]:
    """1.0 when the last ``\\boxed{...}`` of a completion is equivalent to its ground truth, else 0.0.

    Equivalence is math-verify's (numbers, fractions, intervals, sets, expressions), run in `verifier`'s
    worker processes with its per-answer timeout; the gold answer is wrapped in ``\\boxed{}`` so that
    bare LaTeX such as ``\\frac{\\sqrt2}{2}``, ``(1,2]`` or ``\\pi`` parses. Gold answers may be bare,
    boxed or in ``$...$``; no box, an unparsable answer or a timeout give 0.0.

    Raises:
        ValueError: the lengths differ.
    """
    if len(completions) != len(ground_truths):
        raise ValueError(f"{len(completions)} completions for {len(ground_truths)} ground truths")
    predictions = [last_boxed(text) for text in completions]
    golds = [_gold_body(str(gold)) for gold in ground_truths]
    return verifier.check(predictions, golds)


def length_penalty(num_tokens: Sequence[int], max_completion_length: int) -> list[float]:
    """``−num_tokens / max_completion_length`` per completion: 0 for empty, −1 at the length limit.

    Counted in the completion's tokens (the ids the model produced, EOS included when it stopped),
    never in characters: characters per token vary by language and content.

    Raises:
        ValueError: `max_completion_length` is not positive or a count is negative.
    """
    if max_completion_length <= 0:
        raise ValueError(f"max_completion_length must be positive, got {max_completion_length}")
    if any(n < 0 for n in num_tokens):
        raise ValueError("token counts must be non-negative")
    return [-float(n) / max_completion_length for n in num_tokens]
