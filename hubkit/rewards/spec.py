"""`RewardSpec`: the reward a run was trained with, as data (never as code to execute).

A recipe stores the spec in the run manifest (``hubkit.json``, via `to_dict`/`from_dict`); cards print
`RewardSpec.formula()`; `hubkit.rewards.build.build` turns a spec back into hubkit's own implementations.
Only the component names in `COMPONENTS` are accepted, each with the parameters listed there.
"""

from __future__ import annotations

import math
import sys
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, get_args

from hubkit.errors import RewardSpecError

Aggregation = Literal["sum_then_normalize", "normalize_then_sum"]
AGGREGATIONS: tuple[str, ...] = get_args(Aggregation)
StdKind = Literal["unbiased", "biased"]
SCHEMA_VERSION = 1
# Bounds a spec read from a release must keep: a few components, integer parameters a model can have
# (an answer length in tokens).
MAX_COMPONENTS = 32
MAX_PARAM = 1_048_576


@dataclass(frozen=True)
class ComponentInfo:
    """What a component name means: its parameters (name → type), which are required, its formula symbol,
    and whether it compares against the prompt's ground truth."""

    params: dict[str, type]
    required: tuple[str, ...] = ()
    symbol: str = ""
    uses_ground_truth: bool = False


# The components hubkit implements (hubkit.rewards.build maps each name to its function).
COMPONENTS: dict[str, ComponentInfo] = {
    "math_correctness": ComponentInfo(
        params={"timeout_s": int}, symbol="correctness", uses_ground_truth=True
    ),
    "length_penalty": ComponentInfo(
        params={"max_completion_length": int}, required=("max_completion_length",), symbol="(−tokens/{L})"
    ),
    "gsm8k_correctness": ComponentInfo(params={}, symbol="gsm8k_correctness", uses_ground_truth=True),
    "gsm8k_strict_format": ComponentInfo(params={}, symbol="strict_format"),
    "gsm8k_soft_format": ComponentInfo(params={}, symbol="soft_format"),
    "gsm8k_number_only": ComponentInfo(params={}, symbol="number_only"),
}


@dataclass(frozen=True)
class RewardComponent:
    """One reward term hubkit implements (a key of `COMPONENTS`), its weight wᵢ in Σ wᵢ·rᵢ (λ for the length
    penalty) and the JSON scalars it takes (e.g. ``{"max_completion_length": 15000}``).

    Raises:
        RewardSpecError: unknown name, unknown or missing parameter, wrong type, non-finite weight.
    """

    name: str
    weight: float = 1.0
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise RewardSpecError(f"reward component name must be a non-empty string, got {self.name!r}")
        info = COMPONENTS.get(self.name)
        if info is None:
            raise RewardSpecError(f"unknown reward component {self.name!r}: use one of {sorted(COMPONENTS)}")
        if (
            isinstance(self.weight, bool)
            or not isinstance(self.weight, int | float)
            or not abs(self.weight) <= sys.float_info.max  # NaN, infinities and ints no float holds
        ):
            shown = (
                repr(self.weight)
                if len(repr(self.weight)) <= 40
                else f"a number of {len(repr(self.weight))} digits"
            )
            raise RewardSpecError(f"weight of {self.name!r} must be a finite number, got {shown}")
        unknown = sorted(set(self.params) - set(info.params))
        if unknown:
            raise RewardSpecError(f"{self.name!r} takes parameters {sorted(info.params)}, not {unknown}")
        for key in info.required:
            if key not in self.params:
                raise RewardSpecError(f"{self.name!r} needs the parameter {key!r}")
        for key, value in self.params.items():
            if info.params[key] is int and (
                isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_PARAM
            ):
                raise RewardSpecError(
                    f"{self.name}.{key} must be an integer from 1 to {MAX_PARAM}, got {value!r}"
                )

    def symbol(self) -> str:
        """How the component appears in `RewardSpec.formula`."""
        return COMPONENTS[self.name].symbol.format(L=self.params.get("max_completion_length", "L"))


@dataclass(frozen=True)
class RewardSpec:
    """Components, weights and how their scores become advantages within each group of rollouts.

    `aggregation`: ``sum_then_normalize`` (GRPO on Σ wᵢ·rᵢ) or ``normalize_then_sum`` (GDPO, which may
    `batch_whiten` the weighted sum over the batch, as the GDPO paper, TRL and verl do); `std`:
    ``unbiased`` (N-1, as TRL and verl) or ``biased`` (N); `epsilon`, added to the group std before
    dividing: TRL uses 1e-4, verl 1e-6. Component names are unique.

    Raises:
        RewardSpecError: any field is invalid (the message says which).
    """

    components: tuple[RewardComponent, ...]
    aggregation: Aggregation = "sum_then_normalize"
    std: StdKind = "unbiased"
    epsilon: float = 1e-6
    batch_whiten: bool = False
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if not self.components or len(self.components) > MAX_COMPONENTS:
            raise RewardSpecError(f"a reward spec needs 1 to {MAX_COMPONENTS} components")
        names = [c.name for c in self.components]
        if len(set(names)) != len(names):
            raise RewardSpecError(f"reward component names must be unique, got {names}")
        if self.aggregation not in AGGREGATIONS:
            raise RewardSpecError(f"aggregation must be one of {AGGREGATIONS}, got {self.aggregation!r}")
        if self.std not in get_args(StdKind):
            raise RewardSpecError(f"std must be 'unbiased' or 'biased', got {self.std!r}")
        if not isinstance(self.epsilon, int | float) or not (0 <= self.epsilon < math.inf):
            raise RewardSpecError(f"epsilon must be a non-negative number, got {self.epsilon!r}")
        if self.batch_whiten and self.aggregation != "normalize_then_sum":
            raise RewardSpecError("batch_whiten applies to aggregation 'normalize_then_sum' only")
        if self.schema_version > SCHEMA_VERSION:
            raise RewardSpecError(
                f"reward spec schema {self.schema_version} is newer than this hubkit ({SCHEMA_VERSION}): upgrade hubkit"
            )

    @property
    def weights(self) -> dict[str, float]:
        """Component name → weight."""
        return {c.name: float(c.weight) for c in self.components}

    def component(self, name: str) -> RewardComponent | None:
        """The component called `name`, or None."""
        return next((c for c in self.components if c.name == name), None)

    def formula(self) -> str:
        """The reward and its aggregation in one human-readable line (printed by model cards), e.g.
        ``correctness + 0.5·(−tokens/15000), z-normalized within each group (sum_then_normalize; unbiased
        std, ε = 1e-06)``."""

        def wrap(symbol: str) -> str:
            if self.aggregation == "sum_then_normalize":
                return symbol
            return "z" + symbol if symbol.startswith("(") else f"z({symbol})"

        parts: list[str] = []
        for c in self.components:
            term = wrap(c.symbol())
            if abs(c.weight) != 1:
                term = f"{abs(c.weight):g}·{term}"
            sign = "−" if c.weight < 0 else "+"
            parts.append((f"−{term}" if sign == "−" else term) if not parts else f"{sign} {term}")
        total = " ".join(parts)
        if self.aggregation == "sum_then_normalize":
            how = "z-normalized within each group"
        else:
            how = "each term z-normalized within its group"
            if self.batch_whiten:
                how += ", the sum then whitened over the batch"
        return f"{total}, {how} ({self.aggregation}; {self.std} std, ε = {self.epsilon:g})"

    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON-ready data (the form stored in ``hubkit.json``)."""
        data = asdict(self)
        data["components"] = [asdict(c) for c in self.components]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RewardSpec:
        """Rebuild a spec from `to_dict`'s form (RewardSpecError when the data is not a valid spec)."""
        if not isinstance(data, dict):
            raise RewardSpecError(f"reward spec must be a JSON object, got {type(data).__name__}")
        listed = data.get("components")
        if not isinstance(listed, list) or not all(isinstance(c, dict) for c in listed):
            raise RewardSpecError("reward spec components must be a list of objects")
        if any(not isinstance(c.get("params", {}), dict) for c in listed):
            raise RewardSpecError("reward component params must be an object")
        try:
            components = tuple(RewardComponent(**c) for c in listed)
            rest = {k: v for k, v in data.items() if k != "components"}
            return cls(components=components, **rest)
        except (KeyError, TypeError) as e:
            raise RewardSpecError(f"invalid reward spec: {e}") from e


# --- Presets: the two seed runs -------------------------------------------------------------------


def deepscaler_length_penalty(
    lam: float = 0.5,
    max_len: int = 15000,
    aggregation: Aggregation = "sum_then_normalize",
    *,
    batch_whiten: bool | None = None,
    epsilon: float = 1e-6,
) -> RewardSpec:
    """The verl DeepScaleR run: math correctness (0/1) plus λ·(−tokens/max_len), aggregated as the seed run
    (``sum_then_normalize``) or as GDPO (``normalize_then_sum``, then whitened over the batch unless
    `batch_whiten` says otherwise); `epsilon` is verl's GRPO one."""
    if batch_whiten is None:
        batch_whiten = aggregation == "normalize_then_sum"
    return RewardSpec(
        components=(
            RewardComponent("math_correctness", 1.0),
            RewardComponent("length_penalty", lam, {"max_completion_length": max_len}),
        ),
        aggregation=aggregation,
        epsilon=epsilon,
        batch_whiten=batch_whiten,
    )


def gsm8k_seed() -> RewardSpec:
    """The TRL GSM8K run: the seed's four rewards, weight 1 each, TRL's default aggregation and epsilon."""
    return RewardSpec(
        components=(
            RewardComponent("gsm8k_correctness"),
            RewardComponent("gsm8k_strict_format"),
            RewardComponent("gsm8k_soft_format"),
            RewardComponent("gsm8k_number_only"),
        ),
        aggregation="sum_then_normalize",
        epsilon=1e-4,  # TRL adds 1e-4 to the group std (grpo_trainer.py, "std_rewards + 1e-4")
    )
