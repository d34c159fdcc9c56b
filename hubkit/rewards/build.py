"""`build(spec)`: a `RewardSpec` (data) → hubkit's own reward callables and aggregation.

Only hubkit's implementations are ever used: a spec names components, it never carries code.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

from hubkit.rewards import components, gsm8k
from hubkit.rewards.aggregate import AggregationResult, aggregate
from hubkit.rewards.spec import RewardComponent, RewardSpec
from hubkit.rewards.verify import MathVerifier


@dataclass(frozen=True)
class RewardInputs:
    """Everything a component may need about a batch of completions (one entry per completion)."""

    completions: Sequence[str]
    ground_truths: Sequence[str]  # the gold answer of each completion's prompt
    num_tokens: Sequence[int]  # the ids the model produced, EOS included

    def __post_init__(self) -> None:
        if not len(self.completions) == len(self.ground_truths) == len(self.num_tokens):
            raise ValueError(
                f"got {len(self.completions)} completions, {len(self.ground_truths)} ground truths and "
                f"{len(self.num_tokens)} token counts"
            )


ScoreFn = Callable[[RewardInputs], list[float]]


@dataclass(frozen=True)
class BuiltComponent:
    """One component ready to score: its name (stable, used in logs), weight and scoring function."""

    name: str
    weight: float
    score: ScoreFn


class BuiltReward:
    """The callables of a spec: score a batch per component, aggregate scores into advantages.

    Owns the math-verify worker pool when the spec needs one and none was given: call `close()` or use
    it as a context manager.
    """

    def __init__(
        self, spec: RewardSpec, components: tuple[BuiltComponent, ...], verifier: MathVerifier | None
    ):
        self.spec = spec
        self.components = components
        self._owned_verifier = verifier

    def score(self, inputs: RewardInputs) -> dict[str, list[float]]:
        """Each component's raw reward for each completion: name → one reward per completion, in spec order."""
        return {c.name: c.score(inputs) for c in self.components}

    def aggregate(
        self, scores: dict[str, Sequence[float]], group_ids: Sequence[Hashable]
    ) -> AggregationResult:
        """Advantages from `score`'s output with the spec's aggregation, std, epsilon and whitening."""
        return aggregate_with_spec(self.spec, scores, group_ids)

    def close(self) -> None:
        """Stop the worker pool this object started (if any)."""
        if self._owned_verifier is not None:
            self._owned_verifier.close()

    def __enter__(self) -> BuiltReward:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def aggregate_with_spec(
    spec: RewardSpec, scores: Mapping[str, Sequence[float]], group_ids: Sequence[Hashable]
) -> AggregationResult:
    """`hubkit.rewards.aggregate.aggregate` with the spec's weights, aggregation, std, epsilon and whitening."""
    return aggregate(
        scores,
        spec.weights,
        group_ids,
        mode=spec.aggregation,
        std=spec.std,
        epsilon=spec.epsilon,
        batch_whiten=spec.batch_whiten,
    )


def _component_fn(component: RewardComponent, verifier: MathVerifier | None) -> ScoreFn:
    name, params = component.name, component.params
    if name == "math_correctness" and verifier is not None:
        return lambda b: components.math_correctness(b.completions, b.ground_truths, verifier=verifier)
    if name == "length_penalty":
        max_len = params["max_completion_length"]
        return lambda b: components.length_penalty(b.num_tokens, max_len)
    if name == "gsm8k_correctness":
        return lambda b: gsm8k.correctness(b.completions, b.ground_truths)
    if name == "gsm8k_strict_format":
        return lambda b: gsm8k.strict_format(b.completions)
    if name == "gsm8k_soft_format":
        return lambda b: gsm8k.soft_format(b.completions)
    if name == "gsm8k_number_only":
        return lambda b: gsm8k.number_only(b.completions)
    # RewardComponent validates names against COMPONENTS and build() starts a pool for math_correctness,
    # so reaching here is a bug in hubkit, not a bad spec.
    raise AssertionError(f"no implementation for reward component {name!r}")


def build(spec: RewardSpec, *, verifier: MathVerifier | None = None, num_workers: int = 2) -> BuiltReward:
    """Turn a spec into hubkit's reward callables.

    `verifier`: a math-verify pool to share; when None and the spec checks math answers, one is started
    (`num_workers` processes, the component's ``timeout_s`` or 2 s) and owned by the result.

    Raises:
        RewardSpecError: math-verify is needed but not installed.
    """
    owned: MathVerifier | None = None
    correctness = spec.component("math_correctness")
    if correctness is not None and verifier is None:
        owned = MathVerifier(num_workers=num_workers, timeout_s=correctness.params.get("timeout_s", 2))
    pool = verifier or owned
    built = tuple(BuiltComponent(c.name, float(c.weight), _component_fn(c, pool)) for c in spec.components)
    return BuiltReward(spec, built, owned)
