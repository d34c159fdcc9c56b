"""Which training algorithm a run used, from what its files say: never assumed.

The evidence, strongest first: the manifest's reward spec (hubkit's recipes: GRPO, or GDPO for a
normalize-then-sum reward); the class of the saved training arguments (TRL's ``GRPOConfig``,
``SFTConfig``, ``DPOConfig``..., also as Unsloth's ``UnslothGRPOConfig`` or an open-r1 subclass); the
``loss_type`` values only one trainer takes; the metrics only GRPOTrainer logs. A verl run is read from
the GRPO/GDPO recipe's layout. A run with none of these is named by its framework alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hubkit.runs.manifest import MANIFEST_NAME
from hubkit.runs.model import Run

# TRL's config classes by the name they end in (a subclass keeps it: UnslothGRPOConfig, open-r1's GRPOConfig).
_TRL_CONFIGS = {
    "GRPOConfig": "GRPO",
    "RLOOConfig": "RLOO",
    "PPOConfig": "PPO",
    "OnlineDPOConfig": "Online DPO",
    "DPOConfig": "DPO",
    "KTOConfig": "KTO",
    "ORPOConfig": "ORPO",
    "CPOConfig": "CPO",
    "BCOConfig": "BCO",
    "GKDConfig": "GKD",
    "SFTConfig": "SFT",
    "RewardConfig": "reward modelling",
}
_CONFIG_RE = re.compile(rf"({'|'.join(sorted(_TRL_CONFIGS, key=len, reverse=True))})$")
# `loss_type` values each trainer alone takes (TRL 1.x): SFT's token-level losses and GRPO's.
_SFT_LOSSES = frozenset({"nll", "dft"})
_GRPO_LOSSES = frozenset({"grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo"})
# What GRPOTrainer logs at every step and SFT's and DPO's trainers never do.
_GRPO_METRICS = frozenset({"reward", "completions/mean_length"})
# Algorithms whose training signal is a reward (the card then has a Reward section and its citations).
REWARD_DRIVEN = frozenset({"GRPO", "GDPO", "RLOO", "PPO", "Online DPO"})


@dataclass(frozen=True)
class Algorithm:
    """How a run was trained: `name` (``GRPO``, ``SFT``..., None when its files do not say) and where
    that was read (`source`)."""

    name: str | None
    source: str

    @property
    def reward_driven(self) -> bool:
        return self.name in REWARD_DRIVEN


def _gdpo_or_grpo(aggregation: object) -> str:
    return "GDPO" if aggregation == "normalize_then_sum" else "GRPO"


def run_algorithm(run: Run) -> Algorithm:
    """The run's training algorithm, by the strongest evidence its files hold (see the module doc)."""
    spec, settings = run.manifest.reward, run.trainer_settings
    if spec is not None:
        return Algorithm(_gdpo_or_grpo(spec.aggregation), MANIFEST_NAME)
    if run.framework == "verl":
        return Algorithm("GRPO", "the verl recipe's layout")
    values = settings.values if settings is not None else run.manifest.hyperparameters
    source = settings.source if settings is not None else MANIFEST_NAME
    aggregation = values.get("multi_objective_aggregation")
    named = _CONFIG_RE.search(settings.config_class or "") if settings is not None else None
    if named is not None:
        name = _TRL_CONFIGS[named.group(1)]
        return Algorithm(
            _gdpo_or_grpo(aggregation) if name == "GRPO" else name, f"{source} ({named.group(1)})"
        )
    loss = values.get("loss_type")
    if loss in _SFT_LOSSES:
        return Algorithm("SFT", f"{source} (loss_type {loss})")
    if loss in _GRPO_LOSSES:
        return Algorithm(_gdpo_or_grpo(aggregation), f"{source} (loss_type {loss})")
    logged = {name for row in run.metrics.rows for name in row.values}
    if logged >= _GRPO_METRICS:
        return Algorithm(_gdpo_or_grpo(aggregation), "the logged metrics (GRPOTrainer's)")
    return Algorithm(None, "not recorded by the run")
