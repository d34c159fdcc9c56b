"""verl 0.6.1 integration: the file ``custom_reward_function.path`` points to.

verl executes this file (as module ``custom_module``) in its TaskRunner process before it looks up the
reward manager, so importing it registers:

- reward manager ``hubkit`` (`HubkitRewardManager`): scores every response with the spec's components,
  the length penalty counting the response's tokens from the attention mask (EOS included, exactly
  what verl reports as ``response_length``), and returns each component's scores as
  ``reward_extra_info`` (plus ``num_tokens`` and ``acc`` when the spec checks math answers);
- advantage estimator ``hubkit`` (`hubkit_advantage`): the spec's exact aggregation;
and it makes verl 0.6.1's file logger keep every step of ``metrics.jsonl`` (`verl_file_logger`) and its
rollout dump keep a bounded sample of each step (`verl_rollouts`).

verl 0.6.1's estimators see only the summed token rewards and the group ids, not the components, so the
work is split at the point where the components are still visible:

- ``sum_then_normalize``: the manager's reward is ``Σ wᵢ·rᵢ``; the estimator z-normalizes it per group.
- ``normalize_then_sum``: the manager (which has the group ids) emits ``Σ wᵢ·zᵢ``; the estimator
  whitens it over the batch when the spec says so, else passes it through.

Both equal `hubkit.rewards.aggregate.aggregate` on the same scores (the tests check it in verl's own
environment). Differences from verl's built-ins, for the record: verl's ``grpo`` gives a group of one
rollout the advantage ``score / (1 + ε)`` where hubkit gives 0, and verl ≥0.7.1's ``gdpo`` whitens over
tokens (``masked_whiten``), hubkit over rollouts. With ``normalize_then_sum``, ``critic/score/mean``
logs the normalized sum; the raw components are in ``reward_extra_info``.

Launch flags::

    custom_reward_function.path=<this file>
    reward_model.reward_manager=hubkit
    +reward_model.reward_kwargs.spec_file=<hubkit.json or a reward spec JSON>
    algorithm.adv_estimator=hubkit

Requires the sync rollout path (``actor_rollout_ref.rollout.mode=sync``, verl 0.6.1's default: the
async agent loop uses a different reward registry) and ``reward_model.launch_reward_fn_async=False``
(the default: the manager owns math-verify worker processes, which cannot be sent to a Ray task).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from verl import DataProto
from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, register_adv_est
from verl.workers.reward_manager import register
from verl.workers.reward_manager.abstract import AbstractRewardManager
from verl.workers.reward_manager.registry import REWARD_MANAGER_REGISTRY

from hubkit.errors import ManifestError, RewardSpecError
from hubkit.integrations.verl_file_logger import keep_every_line
from hubkit.integrations.verl_rollouts import first_rows
from hubkit.rewards.aggregate import group_normalize
from hubkit.rewards.build import BuiltReward, RewardInputs, build
from hubkit.rewards.spec import RewardSpec
from hubkit.runs.manifest import Manifest

NAME = "hubkit"  # the reward manager's and the estimator's registered name

# The spec of the manager built in this process, read by the estimator. verl hands estimators no
# reward settings, and both run in the TaskRunner process; a second manager (validation) must agree.
_active_spec: RewardSpec | None = None


def _plain(value: Any) -> Any:
    """Hydra's DictConfig/ListConfig → plain dicts and lists (without importing omegaconf)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [_plain(v) for v in value]
    return value


def load_spec(spec: Any = None, spec_file: str | None = None) -> RewardSpec:
    """The reward spec from ``reward_kwargs``: inline (`spec`, a mapping or JSON text) or a JSON file.

    Args:
        spec: a `RewardSpec.to_dict` mapping, or the same as JSON text.
        spec_file: a JSON file holding a reward spec, or a run manifest (``hubkit.json``) with ``reward``.

    Raises:
        RewardSpecError: neither or both are given, the file is missing or not JSON, or the spec is invalid.
    """
    if (spec is None) == (spec_file is None):
        raise RewardSpecError(
            "the hubkit reward manager needs exactly one of +reward_model.reward_kwargs.spec_file=<json> "
            "or +reward_model.reward_kwargs.spec=<json>"
        )
    if spec_file is not None:
        try:
            data = json.loads(Path(spec_file).read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise RewardSpecError(f"cannot read the reward spec file {spec_file}: {e}") from e
        if isinstance(data, dict) and "run_id" in data:  # a run manifest (hubkit.json)
            return _manifest_reward(data, spec_file)
    elif isinstance(spec, str):
        try:
            data = json.loads(spec)
        except json.JSONDecodeError as e:
            raise RewardSpecError(f"the reward spec is not valid JSON: {e}") from e
    else:
        data = _plain(spec)
    return RewardSpec.from_dict(data)


def _manifest_reward(data: dict[str, Any], spec_file: str) -> RewardSpec:
    """The reward a run manifest records, read through `Manifest` like every hubkit.json."""
    try:
        reward = Manifest.from_dict(data).reward
    except ManifestError as e:
        raise RewardSpecError(f"{spec_file}: {e}") from e
    if reward is None:
        raise RewardSpecError(f"{spec_file} is a run manifest that records no reward spec")
    return reward


def _activate(spec: RewardSpec) -> None:
    global _active_spec
    if _active_spec is not None and _active_spec != spec:
        raise RewardSpecError("two hubkit reward managers with different specs in one process: use one spec")
    _active_spec = spec


def compute_score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: Any = None, **_: Any
) -> float:
    """Present because verl requires ``custom_reward_function.name`` to exist in this file; not used.

    Raises:
        RewardSpecError: always: hubkit's rewards need the token counts only a reward manager sees.
    """
    raise RewardSpecError(
        "hubkit's rewards need reward_model.reward_manager=hubkit (token counts come from the attention mask)"
    )


class HubkitRewardManager(AbstractRewardManager):
    """Scores a batch with a `RewardSpec`'s components (see the module docstring).

    Args:
        tokenizer: decodes the responses (special tokens skipped, as verl's naive manager does).
        num_examine: unused (verl passes it to every manager).
        compute_score: unused: the components come from the spec, never from code in a file.
        reward_fn_key: unused (the data source does not select the reward).
        spec, spec_file: the reward spec, see `load_spec`.
        num_workers: math-verify worker processes.

    Raises:
        RewardSpecError: the spec is missing or invalid.
    """

    def __init__(
        self,
        tokenizer: Any,
        num_examine: int,
        compute_score: Any = None,
        reward_fn_key: str = "data_source",
        spec: Any = None,
        spec_file: str | None = None,
        num_workers: int = 2,
    ) -> None:
        self.tokenizer = tokenizer
        self.spec = load_spec(spec, spec_file)
        _activate(self.spec)
        self.reward: BuiltReward = build(self.spec, num_workers=num_workers)

    def __call__(self, data: DataProto, return_dict: bool = False) -> torch.Tensor | dict[str, Any]:
        prompt_length = data.batch["prompts"].shape[-1]
        response_mask = data.batch["attention_mask"][:, prompt_length:]
        num_tokens = response_mask.sum(-1).tolist()  # EOS included, as verl's response_length
        responses = data.batch["responses"]
        texts = [
            self.tokenizer.decode(responses[i, :n], skip_special_tokens=True)
            for i, n in enumerate(num_tokens)
        ]
        ground_truths = [str(item["ground_truth"]) for item in data.non_tensor_batch["reward_model"]]
        scores = self.reward.score(RewardInputs(texts, ground_truths, num_tokens))

        raw = sum(np.asarray(values) * self.spec.weights[name] for name, values in scores.items())
        validating = data.meta_info.get("validate", False) or "uid" not in data.non_tensor_batch
        if validating:
            reward = raw  # validation reports the reward itself, not an advantage
        else:
            uids = list(data.non_tensor_batch["uid"])
            reward = self.reward.aggregate(scores, uids).combined

        reward_tensor = torch.zeros_like(responses, dtype=torch.float32)
        for i, n in enumerate(num_tokens):
            if n > 0:
                reward_tensor[i, n - 1] = float(reward[i])
        if not return_dict:
            return reward_tensor
        extra: dict[str, list[float]] = {name: list(values) for name, values in scores.items()}
        extra["num_tokens"] = [float(n) for n in num_tokens]
        extra["raw_reward"] = [float(r) for r in raw]
        if "math_correctness" in scores:
            extra["acc"] = list(scores["math_correctness"])  # verl's val-core metric key
        return {"reward_tensor": reward_tensor, "reward_extra_info": extra}


def hubkit_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray | None = None,
    config: Any = None,
    **_: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The spec's aggregation of the manager's rewards, one advantage per response broadcast to its tokens.

    Args:
        token_level_rewards: (batch, response_length); each row sums to the manager's reward.
        response_mask: (batch, response_length).
        index: group id (``uid``) per row; without it every row is its own group.
        config: verl's AlgoConfig (unused: the spec carries the settings).

    Returns:
        (advantages, returns), both (batch, response_length) and equal, as verl's outcome estimators.

    Raises:
        RewardSpecError: no hubkit reward manager was created in this process.
    """
    spec = _active_spec
    if spec is None:
        raise RewardSpecError("algorithm.adv_estimator=hubkit needs reward_model.reward_manager=hubkit")
    scores = token_level_rewards.sum(dim=-1).double().cpu().numpy()
    groups = list(index) if index is not None else list(range(len(scores)))
    if spec.aggregation == "sum_then_normalize":
        advantages = group_normalize(scores, groups, std=spec.std, epsilon=spec.epsilon)
    elif spec.batch_whiten:  # the scores are already Σ wᵢ·zᵢ: whiten over the batch
        advantages = group_normalize(scores, [0] * len(scores), std=spec.std, epsilon=spec.epsilon)
    else:
        advantages = scores
    per_token = torch.as_tensor(
        advantages, dtype=token_level_rewards.dtype, device=token_level_rewards.device
    )
    per_token = per_token.unsqueeze(-1) * response_mask
    return per_token, per_token


# Registered once per process even if this file is also imported under its package name: verl refuses
# a second, different object under the same name.
if NAME not in REWARD_MANAGER_REGISTRY:
    register(NAME)(HubkitRewardManager)
if NAME not in ADV_ESTIMATOR_REGISTRY:
    register_adv_est(NAME)(hubkit_advantage)
# verl runs this file in the process that trains and logs: its metrics.jsonl keeps every step from here on,
# and its rollout dump (the recipe's rollouts/) the first rows of each step only.
keep_every_line()
first_rows()
