"""Check a launch configuration without GPUs, with verl's own code, before spending cluster time.

It does what verl 0.6.1's `main_ppo` TaskRunner does before it starts Ray workers: composes the Hydra overrides
with verl's `ppo_trainer` config (an unknown key fails here), resolves it, runs `validate_config` and the
typed config checks, loads the reward file and instantiates its reward manager with the tokenizer, looks up
the advantage estimator, and builds the training dataset (`create_rl_dataset` → `RLHFDataset`) and sampler.
Prints the composed settings as JSON. Run it in verl's environment::

    python recipes/verl_gdpo/preflight.py --tokenizer Qwen/Qwen3-4B -- key=value ...

`launch.sh --preflight` runs it with the launch overrides, after writing the run's manifest (which the
reward manager reads its reward spec from).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

# The composed keys printed for review (and asserted by the tests).
REPORTED_KEYS = (
    "actor_rollout_ref.model.path",
    "actor_rollout_ref.model.lora_rank",
    "actor_rollout_ref.model.lora_alpha",
    "actor_rollout_ref.model.target_modules",
    "actor_rollout_ref.actor.strategy",
    "actor_rollout_ref.actor.optim.optimizer",
    "actor_rollout_ref.actor.optim.lr",
    "actor_rollout_ref.actor.optim.lr_scheduler_type",
    "actor_rollout_ref.actor.optim.lr_warmup_steps",
    "actor_rollout_ref.actor.optim.weight_decay",
    "actor_rollout_ref.actor.optim.betas",
    "actor_rollout_ref.actor.optim.clip_grad",
    "actor_rollout_ref.actor.grad_clip",
    "actor_rollout_ref.actor.ppo_epochs",
    "actor_rollout_ref.actor.ppo_mini_batch_size",
    "actor_rollout_ref.actor.clip_ratio",
    "actor_rollout_ref.actor.clip_ratio_low",
    "actor_rollout_ref.actor.clip_ratio_high",
    "actor_rollout_ref.actor.use_kl_loss",
    "actor_rollout_ref.actor.kl_loss_coef",
    "actor_rollout_ref.ref.strategy",
    "actor_rollout_ref.rollout.name",
    "actor_rollout_ref.rollout.mode",
    "actor_rollout_ref.rollout.n",
    "actor_rollout_ref.rollout.temperature",
    "actor_rollout_ref.rollout.top_p",
    "actor_rollout_ref.rollout.response_length",
    "actor_rollout_ref.rollout.max_num_batched_tokens",
    "actor_rollout_ref.rollout.load_format",
    "actor_rollout_ref.rollout.layered_summon",
    "algorithm.adv_estimator",
    "algorithm.use_kl_in_reward",
    "algorithm.kl_ctrl.kl_coef",
    "data.train_batch_size",
    "data.max_prompt_length",
    "data.max_response_length",
    "reward_model.reward_manager",
    "reward_model.reward_kwargs",
    "trainer.total_training_steps",
    "trainer.save_freq",
    "trainer.n_gpus_per_node",
    "trainer.nnodes",
    "trainer.logger",
    "trainer.default_local_dir",
    "ray_kwargs.ray_init.runtime_env",
)


class PreflightError(Exception):
    """The configuration would fail in verl: the message says which check and why."""


def compose_config(overrides: list[str]) -> DictConfig:
    """verl's `ppo_trainer` config with `overrides` applied and resolved, as `main_ppo` sees it.

    Raises:
        PreflightError: Hydra rejects an override (unknown key, bad value) or interpolation fails.
    """
    # Located without importing verl (seconds of torch/ray imports): composing needs only the YAML files.
    verl_spec = importlib.util.find_spec("verl")
    if verl_spec is None or not verl_spec.submodule_search_locations:
        raise PreflightError("verl is not installed in this environment: run this with verl's Python")
    config_dir = Path(verl_spec.submodule_search_locations[0]) / "trainer" / "config"
    try:
        with initialize_config_dir(config_dir=str(config_dir), version_base=None):
            config = compose(config_name="ppo_trainer", overrides=overrides)
        OmegaConf.resolve(config)
    except (HydraException, OmegaConfBaseException) as e:
        raise PreflightError(f"Hydra refused the overrides: {e}") from e
    return config


def validate(config: DictConfig) -> None:
    """verl's own checks: `validate_config` (as TaskRunner calls it) and the typed rollout/algorithm configs."""
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo.utils import need_critic
    from verl.utils.config import omega_conf_to_dataclass, validate_config
    from verl.workers.config import RolloutConfig

    # TaskRunner adds a reference-policy worker only when a KL term needs one.
    use_reference_policy = bool(
        config.algorithm.use_kl_in_reward or config.actor_rollout_ref.actor.use_kl_loss
    )
    try:
        validate_config(config, use_reference_policy=use_reference_policy, use_critic=need_critic(config))
        omega_conf_to_dataclass(config.actor_rollout_ref.rollout, RolloutConfig)
        omega_conf_to_dataclass(config.algorithm, AlgoConfig)
    except (AssertionError, ValueError, TypeError) as e:
        raise PreflightError(f"verl's config validation failed: {e}") from e


def load_reward(config: DictConfig, tokenizer: Any) -> dict[str, str]:
    """Exec the reward file, instantiate the reward manager with its kwargs and find the estimator."""
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn
    from verl.trainer.ppo.reward import load_reward_manager

    try:
        manager = load_reward_manager(
            config, tokenizer, num_examine=0, **config.reward_model.get("reward_kwargs", {})
        )
        estimator = config.algorithm.adv_estimator
        # GAE and GRPO are hard-wired in ray_trainer.compute_advantage; the rest come from the registry.
        estimator_fn = None if estimator in ("gae", "grpo") else get_adv_estimator_fn(estimator)
    except (ValueError, TypeError, KeyError, NotImplementedError, FileNotFoundError) as e:
        raise PreflightError(f"the reward manager or estimator did not load: {e}") from e
    return {
        "reward_manager": type(manager).__name__,
        "adv_estimator": estimator_fn.__name__ if estimator_fn else estimator,
    }


def load_dataset(config: DictConfig, tokenizer: Any) -> dict[str, Any]:
    """Build the training dataset and sampler exactly as `main_ppo` does; report its size and first prompt."""
    from verl.trainer.main_ppo import create_rl_dataset, create_rl_sampler

    dataset = create_rl_dataset(config.data.train_files, config.data, tokenizer, None, is_train=True)
    create_rl_sampler(config.data, dataset)
    if len(dataset) == 0:
        raise PreflightError("the training dataset is empty after filtering overlong prompts")
    first = dataset[0]
    return {
        "rows": len(dataset),
        "first_prompt_tokens": int(first["attention_mask"].sum()),
        "first_prompt_text": tokenizer.decode(first["input_ids"][first["attention_mask"].bool()]),
        "first_ground_truth": first["reward_model"]["ground_truth"],
    }


def _select(config: DictConfig, key: str) -> Any:
    value = OmegaConf.select(config, key)
    return OmegaConf.to_container(value) if isinstance(value, DictConfig | ListConfig) else value


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--tokenizer", default=None, help="tokenizer (dir or Hub id): also load reward and data"
    )
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, key=value (after --)")
    args = parser.parse_args(argv)

    try:
        config = compose_config(args.overrides)
        validate(config)
        report: dict[str, Any] = {"config": {key: _select(config, key) for key in REPORTED_KEYS}}
        if args.tokenizer:
            from verl.utils import hf_tokenizer

            tokenizer = hf_tokenizer(args.tokenizer)
            report.update(load_reward(config, tokenizer))
            report["dataset"] = load_dataset(config, tokenizer)
    except PreflightError as e:
        sys.exit(f"Error: {e}")
    json.dump(report, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
