"""The LoRA delta: the one place where the merge math lives."""

from __future__ import annotations

import math

import torch

from hubkit.errors import MergeError


def lora_scale(lora_alpha: float, rank: int, use_rslora: bool) -> float:
    """PEFT's scaling factor: alpha / r, or alpha / sqrt(r) for rsLoRA (arXiv 2312.03732).

    Args:
        lora_alpha: the adapter's `lora_alpha` (after `alpha_pattern`).
        rank: the module's rank r (after `rank_pattern`).
        use_rslora: whether the adapter was trained with rank-stabilized scaling.

    Returns:
        The factor that multiplies B @ A.
    """
    return lora_alpha / math.sqrt(rank) if use_rslora else lora_alpha / rank


def lora_delta(lora_a: torch.Tensor, lora_b: torch.Tensor, scale: float, module: str) -> torch.Tensor:
    """(B @ A) * scale in float32, the change LoRA makes to a Linear weight of shape (out, in).

    Computed in float32 whatever the adapter's dtype, as PEFT does on CPU: bf16 products lose the
    small updates that a LoRA usually makes.

    Args:
        lora_a: A, shape (r, in).
        lora_b: B, shape (out, r).
        scale: from `lora_scale`.
        module: the module name, for the error message.

    Returns:
        The float32 delta, shape (out, in).

    Raises:
        MergeError: the delta holds NaN or infinity.
    """
    delta = (lora_b.to(torch.float32) @ lora_a.to(torch.float32)).mul_(scale)
    if not torch.isfinite(delta).all():
        raise MergeError(f"the LoRA delta of {module} holds NaN or infinity; this adapter cannot be merged")
    return delta
