"""`RewardSpec`: the reward a run was trained with, as data (never as code to execute)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from hubkit.errors import RewardSpecError

Aggregation = Literal["sum_then_normalize", "normalize_then_sum"]
AGGREGATIONS: tuple[str, ...] = ("sum_then_normalize", "normalize_then_sum")
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class RewardComponent:
    """One named reward term and its weight in the combination.

    Args:
        name: a component hubkit implements (e.g. ``math_correctness``, ``length_penalty``).
        weight: its weight wᵢ in Σ wᵢ·rᵢ (λ for the length penalty).
        params: JSON scalars the component takes (e.g. ``{"max_completion_length": 15000}``).
    """

    name: str
    weight: float = 1.0
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise RewardSpecError(f"reward component name must be a non-empty string, got {self.name!r}")


@dataclass(frozen=True)
class RewardSpec:
    """Components, weights and how their scores become advantages within each group of rollouts.

    Args:
        components: the reward terms.
        aggregation: ``sum_then_normalize`` (GRPO on Σ wᵢ·rᵢ) or ``normalize_then_sum`` (GDPO).
        std: ``unbiased`` (N-1, as TRL and verl) or ``biased`` (N).
        epsilon: added to the group std before dividing.
        batch_whiten: for ``normalize_then_sum``: whiten the weighted sum over the batch (GDPO paper, verl).
    """

    components: tuple[RewardComponent, ...]
    aggregation: Aggregation = "sum_then_normalize"
    std: Literal["unbiased", "biased"] = "unbiased"
    epsilon: float = 1e-6
    batch_whiten: bool = False
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if not self.components:
            raise RewardSpecError("a reward spec needs at least one component")
        if self.aggregation not in AGGREGATIONS:
            raise RewardSpecError(f"aggregation must be one of {AGGREGATIONS}, got {self.aggregation!r}")
        if self.std not in ("unbiased", "biased"):
            raise RewardSpecError(f"std must be 'unbiased' or 'biased', got {self.std!r}")
        if self.schema_version > SCHEMA_VERSION:
            raise RewardSpecError(
                f"reward spec schema {self.schema_version} is newer than this hubkit ({SCHEMA_VERSION}): upgrade hubkit"
            )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RewardSpec:
        if not isinstance(data, dict):
            raise RewardSpecError(f"reward spec must be a JSON object, got {type(data).__name__}")
        try:
            components = tuple(RewardComponent(**c) for c in data["components"])
            rest = {k: v for k, v in data.items() if k != "components"}
            return cls(components=components, **rest)
        except (KeyError, TypeError) as e:
            raise RewardSpecError(f"invalid reward spec: {e}") from e
