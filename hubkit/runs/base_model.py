"""Quantized bases (QLoRA): which base model names are 4-bit checkpoints, and the full-precision base of
the ones hubkit knows.

Unsloth loads ``Qwen/Qwen2.5-3B-Instruct`` with ``load_in_4bit=True`` from its own pre-quantized repo and
PEFT then saves that repo's id as the adapter's base (research: trl.md §0.8). The adapter fits the
full-precision base as well (same modules and shapes), and that is the base a release must name: a 4-bit
base needs bitsandbytes and a GPU to load, and cannot be merged into.
"""

from __future__ import annotations

import re

# Unsloth's 4-bit repos of the bases hubkit's recipes train (both the plain and the dynamic quants).
KNOWN_FULL_PRECISION: dict[str, str] = {
    "unsloth/qwen2.5-3b-instruct-bnb-4bit": "Qwen/Qwen2.5-3B-Instruct",
    "unsloth/qwen2.5-3b-instruct-unsloth-bnb-4bit": "Qwen/Qwen2.5-3B-Instruct",
    "unsloth/qwen3-4b-bnb-4bit": "Qwen/Qwen3-4B",
    "unsloth/qwen3-4b-unsloth-bnb-4bit": "Qwen/Qwen3-4B",
    "unsloth/qwen3-4b-instruct-2507-bnb-4bit": "Qwen/Qwen3-4B-Instruct-2507",
    "unsloth/qwen3-4b-instruct-2507-unsloth-bnb-4bit": "Qwen/Qwen3-4B-Instruct-2507",
}
# How quantized checkpoints are named on the Hub: bitsandbytes (Unsloth: "-bnb-4bit", "-unsloth-bnb-4bit"),
# and the common "-4bit" / "-8bit" / GPTQ / AWQ suffixes.
_QUANTIZED_NAME_RE = re.compile(
    r"(?:[-_.](?:bnb[-_])?[48]bit|[-_.](?:gptq|awq)(?:[-_.]?int[48])?)$", re.IGNORECASE
)


def is_quantized_name(repo_id: str) -> bool:
    """Whether a base model's Hub id names a quantized checkpoint (``unsloth/Qwen3-4B-bnb-4bit``)."""
    return bool(_QUANTIZED_NAME_RE.search(repo_id))


def known_full_precision(repo_id: str) -> str | None:
    """The full-precision base of a quantized base hubkit knows (Hub ids compare case-insensitively)."""
    return KNOWN_FULL_PRECISION.get(repo_id.lower())
