"""TRL ``GRPOTrainer`` integration (TRL 1.16): reward functions, config mapping, exact aggregation.

Usage::

    spec = deepscaler_length_penalty(lam=0.5, max_len=768)
    with build(spec) as reward:
        args = GRPOConfig(..., max_completion_length=768, **grpo_config_kwargs(spec))
        trainer = HubkitGRPOTrainer(model, reward_funcs=reward_funcs(reward), args=args, reward_spec=spec, ...)
        trainer.train()

`HubkitGRPOTrainer` is exact for every spec; where `trl_matches(spec)` is True a plain ``GRPOTrainer``
with the same reward functions and config gives the same advantages.

How hubkit's aggregation maps onto TRL's ``multi_objective_aggregation`` (``grpo_trainer.py``):

- ``sum_then_normalize`` with ``unbiased`` std and ``epsilon=1e-4`` *is* TRL's default
  (``scale_rewards="group"``): plain ``GRPOTrainer`` computes the same advantages.
- ``normalize_then_sum`` with ``batch_whiten=True``, ``unbiased`` std and ``epsilon=1e-4`` *is* TRL's
  ``multi_objective_aggregation="normalize_then_sum"``, which always ends with a batch z-score.
- Anything else differs from TRL: TRL hard-codes ``std + 1e-4`` and the batch z-score, so verl's
  ``1e-6``, a biased std, or GDPO without batch whitening need `HubkitGRPOTrainer`, which replaces TRL's
  advantages with `hubkit.rewards.aggregate.aggregate` of the very same rewards.

The two agree up to float32 rounding (TRL computes in float32), and on groups without spread hubkit's
advantages are exactly 0 where TRL's are rounding noise divided by 1e-4.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from trl import GRPOTrainer

from hubkit.errors import RewardSpecError
from hubkit.rewards.build import BuiltComponent, BuiltReward, RewardInputs, aggregate_with_spec
from hubkit.rewards.spec import COMPONENTS, RewardSpec

TRL_EPSILON = 1e-4  # TRL adds this to every std it divides by; not configurable in TRL 1.16


def trl_matches(spec: RewardSpec) -> bool:
    """True when TRL's own ``multi_objective_aggregation`` computes the spec's advantages (the module
    docstring says when); False when `HubkitGRPOTrainer` is needed."""
    if spec.std != "unbiased" or spec.epsilon != TRL_EPSILON:
        return False
    return spec.aggregation == "sum_then_normalize" or spec.batch_whiten


def grpo_config_kwargs(spec: RewardSpec) -> dict[str, Any]:
    """The ``GRPOConfig`` fields that carry the spec's weights (in spec order, matching `reward_funcs`) and
    aggregation."""
    return {
        "reward_weights": [float(c.weight) for c in spec.components],
        "multi_objective_aggregation": spec.aggregation,
        "scale_rewards": "group",
    }


def _completion_text(completion: str | list[dict[str, Any]]) -> str:
    """A TRL completion as text: standard datasets give a string, conversational ones a message list."""
    if isinstance(completion, str):
        return completion
    return str(completion[-1]["content"]) if completion else ""


def _reward_func(component: BuiltComponent, ground_truth_column: str) -> Callable[..., list[float]]:
    needs_ground_truth = COMPONENTS[component.name].uses_ground_truth

    def reward(
        prompts: list[Any], completions: list[Any], completion_ids: list[list[int]], **kwargs: Any
    ) -> list[float]:
        if needs_ground_truth and ground_truth_column not in kwargs:
            raise RewardSpecError(
                f"the training dataset has no {ground_truth_column!r} column for {component.name}: add it, "
                "and keep GRPOConfig(remove_unused_columns=False)"
            )
        inputs = RewardInputs(
            completions=[_completion_text(c) for c in completions],
            ground_truths=[str(g) for g in kwargs.get(ground_truth_column, [""] * len(completions))],
            num_tokens=[len(ids) for ids in completion_ids],
        )
        return component.score(inputs)

    # TRL logs rewards/<__name__>/mean: the component's name, stable across runs.
    reward.__name__ = reward.__qualname__ = component.name
    return reward


def reward_funcs(
    reward: BuiltReward, ground_truth_column: str = "answer"
) -> list[Callable[..., list[float]]]:
    """One TRL reward function of `reward` (`build(spec)`) per component, in spec order, each named after its
    component, for ``GRPOTrainer(reward_funcs=...)`` with `grpo_config_kwargs(spec)`.

    Token counts come from TRL's ``completion_ids`` (the generated ids, EOS included when the model
    stopped); ground truths from the dataset column `ground_truth_column`.
    """
    return [_reward_func(c, ground_truth_column) for c in reward.components]


class HubkitGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` whose advantages are hubkit's aggregation of the rewards TRL computed.

    TRL scores the completions as usual (so ``rewards/<name>/mean`` and ``reward`` are logged as usual);
    then the advantages are recomputed with `hubkit.rewards.aggregate.aggregate` using the spec's mode,
    std, epsilon and batch whitening, over TRL's groups (``num_generations`` consecutive completions per
    prompt, gathered across processes), and this process's slice replaces TRL's. The completions table
    TRL logs (``log_completions``) still shows TRL's own advantages.

    `reward_spec` is the spec `reward_funcs` were built from; the trainer's reward function names and
    ``reward_weights`` must match it.

    Raises:
        RewardSpecError: the reward functions or weights do not match `reward_spec`.
    """

    def __init__(self, *args: Any, reward_spec: RewardSpec, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = [c.name for c in reward_spec.components]
        if list(self.reward_func_names) != names:
            raise RewardSpecError(
                f"reward functions {self.reward_func_names} do not match the spec's components {names}: "
                "pass reward_funcs=reward_funcs(build(spec))"
            )
        weights = [float(c.weight) for c in reward_spec.components]
        trl_weights = self.reward_weights.tolist()
        if len(trl_weights) != len(weights) or not all(
            math.isclose(a, b, rel_tol=1e-6) for a, b in zip(trl_weights, weights, strict=True)
        ):
            raise RewardSpecError(
                f"GRPOConfig.reward_weights {trl_weights} do not match the spec's {weights}: "
                "pass GRPOConfig(**grpo_config_kwargs(spec))"
            )
        self.reward_spec = reward_spec
        self._rewards_per_func: torch.Tensor | None = None

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):  # type: ignore[no-untyped-def]
        # Keep the rewards (all processes, one column per function) for the advantages below.
        self._rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        return self._rewards_per_func

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        rewards = self._rewards_per_func
        if rewards is None:  # _calculate_rewards always runs inside the call above
            raise AssertionError("GRPOTrainer did not compute rewards")
        num_generations = self.num_generations if self.model.training else self.num_generations_eval
        result = aggregate_with_spec(
            self.reward_spec,
            {name: rewards[:, k].double().cpu().numpy() for k, name in enumerate(self.reward_func_names)},
            [i // num_generations for i in range(rewards.shape[0])],
        )
        local = output["advantages"]
        start = self.accelerator.process_index * local.shape[0]
        output["advantages"] = torch.as_tensor(
            result.advantages[start : start + local.shape[0]], dtype=local.dtype, device=local.device
        )
        self._rewards_per_func = None
        return output
