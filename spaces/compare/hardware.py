"""What the hardware the app runs on allows: the dtype of the weights, how many adapters stay loaded beside
the base model, and the default answer length.

The base model loads in its own dtype (bfloat16 for Qwen3) on a GPU and on a CPU alike: a 4B model takes
8 GB instead of float32's 16, and a free CPU Space has 16 GB. A CPU keeps one adapter loaded at a time and
answers shortly by default (it makes tokens slowly); a GPU keeps several and answers as long as the run
trained.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from config import AppConfig


def resolve_dtype(name: str, device: str, checkpoint_dtype: torch.dtype | None) -> torch.dtype:
    """The dtype to load the base model in.

    Args:
        name: the config's `dtype`: "auto", or the name of a torch dtype (used as it is).
        device: "cpu" or a CUDA device.
        checkpoint_dtype: the dtype the base model's config names (None: float32, transformers' default).

    Returns:
        For "auto", the checkpoint's dtype, except bfloat16 on a GPU older than Ampere (compute
        capability 8), which has no bfloat16 arithmetic: float16 there. A CPU computes in bfloat16.
    """
    if name != "auto":
        return getattr(torch, name)
    dtype = checkpoint_dtype or torch.float32
    if (
        dtype == torch.bfloat16
        and device.startswith("cuda")
        and torch.cuda.get_device_capability(device)[0] < 8
    ):
        return torch.float16
    return dtype


@dataclass(frozen=True)
class Limits:
    """What the hardware allows: adapters kept loaded beside the base, and the default answer length.

    Args:
        capacity: `max_loaded_adapters` on a GPU, `cpu_max_loaded_adapters` on a CPU.
        default_max_new_tokens: the answer length when a request names none: `max_new_tokens` on a GPU,
            at most `cpu_max_new_tokens` on a CPU.
    """

    capacity: int
    default_max_new_tokens: int

    @classmethod
    def for_device(cls, config: AppConfig, device: str) -> Limits:
        """The limits of `config` on `device` ("cpu", or a CUDA device)."""
        if device.startswith("cuda"):
            return cls(config.max_loaded_adapters, config.max_new_tokens)
        return cls(config.cpu_max_loaded_adapters, min(config.cpu_max_new_tokens, config.max_new_tokens))
