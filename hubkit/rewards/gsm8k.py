"""The four GSM8K rewards of the TRL seed run, exactly (patterns and scores from its ``rewards.py``).

The seed adapted Unsloth's Qwen2.5-3B GRPO notebook and fixed two of its bugs, which these keep fixed:
the patterns use ``re.DOTALL`` (so multi-line reasoning matches) and numbers are compared numerically
(so ``1,000`` equals ``1000`` and negatives or decimals count). Completions are expected in the format
of `SYSTEM_PROMPT`. Each function maps a batch of completion texts to one score per completion.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

SYSTEM_PROMPT = """
Respond in the following format:
<reasoning>
...
</reasoning>
<answer>
...
</answer>
"""

CORRECTNESS_SCORE = 2.0
STRICT_FORMAT_SCORE = 0.5
SOFT_FORMAT_SCORE = 0.5
NUMBER_ONLY_SCORE = 0.5

ANSWER_BLOCK_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)  # the last match is the answer
NUMBER_RE = re.compile(r"-?(?:\d[\d,]*(?:\.\d+)?|\.\d+)")  # the last match is the number; commas dropped
STRICT_FORMAT_RE = re.compile(r"\s*<reasoning>\n.*?\n</reasoning>\n<answer>\n.*?\n</answer>\s*", re.DOTALL)
SOFT_FORMAT_RE = re.compile(r"<reasoning>.*?</reasoning>\s*<answer>.*?</answer>", re.DOTALL)
PURE_NUMBER_RE = re.compile(r"-?(?:\d[\d,]*(?:\.\d+)?|\.\d+)")  # fullmatch on the stripped answer block


def extract_final_number(text: str) -> float | None:
    """The last number in `text` (``1,234.5`` style, commas removed), or None when there is none."""
    matches = NUMBER_RE.findall(text)
    if not matches:
        return None
    # NUMBER_RE only matches digit runs (with commas and one decimal part), so this always converts.
    return float(matches[-1].replace(",", ""))


def extract_gold_answer(gold: str | float | int) -> float | None:
    """The gold number of a GSM8K answer: the last number after ``####`` (or anywhere, if there is none).

    Already-extracted values (``"72"``, ``72``) are accepted as they are.
    """
    if isinstance(gold, int | float):
        return float(gold)
    text = gold.split("####")[-1] if "####" in gold else gold
    return extract_final_number(text)


def extract_answer_block(completion: str) -> str | None:
    """The content of the last ``<answer>...</answer>`` block, or None when there is none."""
    blocks = ANSWER_BLOCK_RE.findall(completion)
    return blocks[-1] if blocks else None


def correctness(completions: Sequence[str], answers: Sequence[str | float | int]) -> list[float]:
    """2.0 when the last number in the last ``<answer>`` block equals the gold number, else 0.0 (also without
    an ``<answer>`` block or a number in it). `answers`: GSM8K gold answers (the full solution ending
    ``#### 72``, or just the number).

    Raises:
        ValueError: the lengths differ.
    """
    if len(completions) != len(answers):
        raise ValueError(f"{len(completions)} completions for {len(answers)} answers")
    scores = []
    for completion, answer in zip(completions, answers, strict=True):
        block = extract_answer_block(completion)
        predicted = extract_final_number(block) if block is not None else None
        gold = extract_gold_answer(answer)
        equal = (
            predicted is not None
            and gold is not None
            and math.isclose(predicted, gold, rel_tol=0.0, abs_tol=1e-6)
        )
        scores.append(CORRECTNESS_SCORE if equal else 0.0)
    return scores


def strict_format(completions: Sequence[str]) -> list[float]:
    """0.5 when the whole completion is ``<reasoning>\\n…\\n</reasoning>\\n<answer>\\n…\\n</answer>``.

    Surrounding whitespace is allowed; the reasoning and the answer may span several lines.
    """
    return [STRICT_FORMAT_SCORE if STRICT_FORMAT_RE.fullmatch(c) else 0.0 for c in completions]


def soft_format(completions: Sequence[str]) -> list[float]:
    """0.5 when a ``<reasoning>…</reasoning>`` block is followed by an ``<answer>…</answer>`` block."""
    return [SOFT_FORMAT_SCORE if SOFT_FORMAT_RE.search(c) else 0.0 for c in completions]


def number_only(completions: Sequence[str]) -> list[float]:
    """0.5 when the last ``<answer>`` block holds a plain number and nothing else (whitespace aside)."""
    scores = []
    for completion in completions:
        block = extract_answer_block(completion)
        plain = block is not None and PURE_NUMBER_RE.fullmatch(block.strip()) is not None
        scores.append(NUMBER_ONLY_SCORE if plain else 0.0)
    return scores
