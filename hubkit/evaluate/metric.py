"""The evaluation metric: the correctness component of the run's own reward spec, as a 0/1 verdict.

A DeepScaleR-style run (``math_correctness``) is scored with math-verify, a GSM8K run
(``gsm8k_correctness``) with the seed's last-number-in-``<answer>`` rule; both through
`hubkit.rewards.build`, so an answer is judged exactly as the reward judged it during training.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from hubkit.errors import EvalError
from hubkit.evaluate.problems import GSM8K_TEST, HubSource
from hubkit.rewards.build import RewardInputs, build
from hubkit.rewards.gsm8k import extract_gold_answer
from hubkit.rewards.spec import RewardComponent, RewardSpec
from hubkit.runs.eval_results import METRICS, MetricInfo, MetricName

_RULES: dict[str, str] = {
    "gsm8k_correctness": "The last number in the last <answer>...</answer> block equals the reference number",
    "math_correctness": "The last \\boxed{...} of the answer is equivalent to the reference under math-verify",
}
_REWARD_NAMES: dict[str, str] = {"gsm8k_correctness": "GSM8K", "math_correctness": "math"}
# answers, references -> one verdict per answer
Scorer = Callable[[Sequence[str], Sequence[str]], list[bool]]


@dataclass(frozen=True)
class Metric:
    """Which correctness reward judges the answers, and its parameters from the run's spec. `from_run` is
    False when `--metric` chose one that the run's reward does not have (or the run records no reward)."""

    component: RewardComponent
    from_run: bool = True

    def __post_init__(self) -> None:
        if self.component.name not in METRICS:
            raise EvalError(f"the metric must be one of {METRICS}, got {self.component.name!r}")

    @property
    def name(self) -> MetricName:
        return self.component.name  # type: ignore[return-value]

    @property
    def info(self) -> MetricInfo:
        """The metric as results record it, saying whether it is the run's own reward."""
        kind = _REWARD_NAMES[self.name]
        whose = (
            f"the run's {kind} correctness reward"
            if self.from_run
            else f"hubkit's {kind} correctness reward, chosen with --metric"
        )
        return MetricInfo(name=self.name, description=f"{_RULES[self.name]} ({whose})")

    @property
    def default_problems(self) -> HubSource | None:
        """The held-out set used when none is named: GSM8K's test split for GSM8K runs, else none."""
        return GSM8K_TEST if self.name == "gsm8k_correctness" else None

    def reference(self, answer: str) -> str:
        """The reference as results show it: a GSM8K solution's final number (``#### 72`` → ``72``)."""
        gold = extract_gold_answer(answer) if self.name == "gsm8k_correctness" else None
        if gold is None:
            return answer.strip()
        return str(int(gold)) if gold.is_integer() else str(gold)

    @contextmanager
    def scorer(self, num_workers: int = 2) -> Iterator[Scorer]:
        """Judges answers with `hubkit.rewards` while open (math-verify workers for ``math_correctness``):
        ``score(answers, references)`` is True for each answer the reward scores above 0 (references in the
        data's, or `Metric.reference`'s, form)."""
        spec = RewardSpec(components=(RewardComponent(self.component.name, 1.0, self.component.params),))
        reward = build(spec, num_workers=num_workers)

        def score(answers: Sequence[str], references: Sequence[str]) -> list[bool]:
            inputs = RewardInputs(
                completions=answers, ground_truths=references, num_tokens=[0] * len(answers)
            )
            return [value > 0 for value in reward.score(inputs)[self.name]]

        try:
            yield score
        finally:
            reward.close()


def metric_for(spec: RewardSpec | None, override: str | None = None) -> Metric:
    """The metric of a run: its spec's correctness component, or the one named by `override` (with the
    spec's parameters when the spec has that component).

    Raises:
        EvalError: an unknown override, or no override and no correctness component in the spec.
    """
    if override is not None:
        if override not in METRICS:
            raise EvalError(f"--metric must be one of {', '.join(METRICS)}, got {override!r}")
        component = spec.component(override) if spec is not None else None
        if component is None:
            return Metric(RewardComponent(override), from_run=False)
        return Metric(component)
    found = [c for c in (spec.components if spec else ()) if c.name in METRICS]
    if len(found) != 1:
        why = "records no reward spec" if spec is None else f"has {len(found)} correctness components"
        raise EvalError(f"the run {why}: pass --metric {' or --metric '.join(METRICS)}")
    return Metric(found[0])
