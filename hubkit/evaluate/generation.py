"""What a generation backend is given and what it returns, the same for transformers and vLLM.

A backend gets the base model's folder, one adapter folder per checkpoint, the prompts as token ids and
the settings, and returns the generated token ids of every (model, prompt). Everything textual (chat
template, decoding, scoring) happens outside the backends, once, in `hubkit.evaluate.chat` and
`hubkit.evaluate.metric`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from hubkit.errors import EvalError
from hubkit.runs.eval_results import BASE_NAME

# Called with the number of (model, problem) answers just finished.
Progress = Callable[[int], None]

# The dtype the base model is loaded in. bfloat16 is what the seed's Qwen3 checkpoints are stored in: a 4B
# model needs 8 GB then, against 16 GB in float32. "auto" takes the dtype the base's config names.
Dtype = Literal["bfloat16", "float16", "float32", "auto"]
DTYPES: tuple[str, ...] = get_args(Dtype)
DEFAULT_DTYPE: Dtype = "bfloat16"


@dataclass(frozen=True)
class GenerationSettings:
    """Decoding settings: greedy unless `temperature` > 0 (`top_p` and `seed` apply to sampling only; the
    seed is always recorded). Each call of `batch_size` problems answers them for every model at once.

    Raises:
        EvalError: a value out of range.
    """

    max_new_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    batch_size: int = 8

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1 or self.batch_size < 1:
            raise EvalError(
                f"--max-new-tokens and --batch-size must be at least 1, got {self.max_new_tokens} and "
                f"{self.batch_size}"
            )
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise EvalError(
                f"--temperature must be >= 0 and --top-p in (0, 1], got {self.temperature} and {self.top_p}"
            )

    @property
    def do_sample(self) -> bool:
        return self.temperature > 0


@dataclass(frozen=True)
class GenerationJob:
    """Everything a backend needs: the base model's folder, the models to answer with in order
    (`BASE_NAME` and/or checkpoint names), each checkpoint's PEFT adapter folder, the prompts as token ids.

    Raises:
        EvalError: no model, a checkpoint without an adapter, or an unknown dtype.
    """

    base_dir: Path
    models: tuple[str, ...]
    adapters: tuple[tuple[str, Path], ...]
    prompts: tuple[tuple[int, ...], ...]
    settings: GenerationSettings
    stop_ids: tuple[int, ...]
    pad_id: int
    dtype: Dtype = DEFAULT_DTYPE

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise EvalError(f"--dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        if not self.models:
            raise EvalError("nothing to evaluate: no base model and no checkpoint")
        missing = [m for m in self.models if m != BASE_NAME and m not in dict(self.adapters)]
        if missing:
            raise EvalError(f"no adapter for {missing}")

    @property
    def total(self) -> int:
        """The number of answers: problems × models."""
        return len(self.prompts) * len(self.models)

    def batches(self) -> list[range]:
        """Problem index ranges of `settings.batch_size` problems."""
        size = self.settings.batch_size
        return [
            range(start, min(start + size, len(self.prompts))) for start in range(0, len(self.prompts), size)
        ]


# model name → the generated ids of each prompt, in prompt order.
GeneratedIds = dict[str, list[list[int]]]
