"""The LoRA delta: the one place where the merge math lives."""

from __future__ import annotations

import math

import torch

from hubkit.errors import MergeError

# Rows are merged in blocks of about this many elements (2 MiB of float32): small enough to stay in
# the CPU caches between the float32 conversion, the product, the check and the cast back, which makes
# the merge several times faster than whole-tensor passes and keeps one float32 block in memory.
BLOCK_ELEMENTS = 1 << 19


def lora_scale(lora_alpha: float, rank: int, use_rslora: bool) -> float:
    """PEFT's scaling factor, which multiplies B @ A: alpha / r, or alpha / sqrt(r) for rsLoRA (arXiv
    2312.03732); `lora_alpha` and `rank` are the module's, after `alpha_pattern` and `rank_pattern`."""
    return lora_alpha / math.sqrt(rank) if use_rslora else lora_alpha / rank


def add_lora_delta_(
    weight: torch.Tensor,
    lora_a: torch.Tensor,
    lora_b: torch.Tensor,
    scale: float,
    module: str,
    magnitude: torch.Tensor | None = None,
) -> None:
    """Merge in place: weight <- cast(float32(weight) + scale * B @ A), the Linear weight LoRA trained.

    The sum is computed in float32 whatever the weight's and the adapter's dtype (as PEFT does on
    CPU: a bf16 product would lose the small updates a LoRA makes), then rounded once to the weight's
    dtype. With DoRA's `magnitude` m, each row of the sum is then rescaled to m / ||row|| (PEFT's
    `DoraLinearVariant.merge_unsafe`: the norm, detached there, is of W + scale * B @ A, per output row).

    Args:
        weight: the base weight, shape (out, in), float32, float16 or bfloat16; modified in place.
        lora_a: A, shape (r, in).
        lora_b: B, shape (out, r).
        scale: from `lora_scale`.
        magnitude: DoRA's ``lora_magnitude_vector``, shape (out,); None for plain LoRA.

    Raises:
        MergeError: the merged weight holds NaN or infinity.
    """
    lora_a = lora_a.to(torch.float32)
    lora_b = lora_b.to(torch.float32)
    if magnitude is not None:
        magnitude = magnitude.to(torch.float32)
    rows = max(1, BLOCK_ELEMENTS // weight.shape[1])
    block_buffer = None if weight.dtype == torch.float32 else torch.empty(rows, weight.shape[1])
    for start in range(0, weight.shape[0], rows):
        target = weight[start : start + rows]
        block = target if block_buffer is None else block_buffer[: target.shape[0]].copy_(target)
        block.addmm_(lora_b[start : start + rows], lora_a, alpha=scale)
        if magnitude is not None:  # a row's norm needs only that row: blocks of rows stay exact
            norms = torch.linalg.vector_norm(block, dim=1)
            block.mul_((magnitude[start : start + rows] / norms).unsqueeze(1))
        # NaN and infinity propagate into the sum, so one cheap reduction finds them; only a sum that
        # overflows from finite values needs the element-wise check.
        if not torch.isfinite(block.sum()) and not torch.isfinite(block).all():
            raise MergeError(f"merging {module} gives NaN or infinity; this adapter cannot be merged")
        if block_buffer is not None:
            target.copy_(block)
