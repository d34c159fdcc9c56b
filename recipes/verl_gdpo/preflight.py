"""Check a launch configuration without GPUs, with verl's own code, before spending cluster time.

It runs what verl 0.6.1's `main_ppo` does up to the point where Ray starts GPU workers: composes the Hydra
overrides with verl's `ppo_trainer` config (an unknown key fails here) and resolves it, then follows
`TaskRunner.run`: registers the worker roles, runs `validate_config`, loads the reward file and builds the
training and validation reward managers with the tokenizer, builds both datasets (`create_rl_dataset` →
`RLHFDataset`) and the sampler, and constructs `RayPPOTrainer` (its dataloaders and step count). It also
looks up the advantage estimator. Prints the composed settings and what was built, as JSON. Run it in
verl's environment::

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


def build_trainer(config: DictConfig, tokenizer: Any) -> Any:
    """`TaskRunner.run` (verl 0.6.1, `main_ppo.py`) up to `trainer.init_workers()`, which needs GPUs.

    Returns:
        The `RayPPOTrainer`, with its reward managers, datasets and dataloaders built.

    Raises:
        PreflightError: a verl check fails, or the reward or the data do not load.
    """
    from verl.trainer.main_ppo import TaskRunner, create_rl_dataset, create_rl_sampler
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer
    from verl.trainer.ppo.reward import load_reward_manager
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config
    from verl.utils.dataset.rl_dataset import collate_fn

    runner = TaskRunner()  # the plain class: main_ppo wraps it with ray.remote only to run it
    try:
        actor_rollout_cls, worker_group_cls = runner.add_actor_rollout_worker(config)
        runner.add_critic_worker(config)
        runner.add_reward_model_worker(config)
        runner.add_ref_policy_worker(config, actor_rollout_cls)
        validate_config(
            config=config,
            use_reference_policy=need_reference_policy(runner.role_worker_mapping),
            use_critic=need_critic(config),
        )
    except (AssertionError, ValueError, TypeError, NotImplementedError) as e:
        raise PreflightError(f"verl's config validation failed: {e}") from e
    try:
        reward_kwargs = config.reward_model.get("reward_kwargs", {})
        reward_fn = load_reward_manager(config, tokenizer, num_examine=0, **reward_kwargs)
        val_reward_fn = load_reward_manager(config, tokenizer, num_examine=1, **reward_kwargs)
    except (ValueError, TypeError, KeyError, NotImplementedError, FileNotFoundError) as e:
        raise PreflightError(f"the reward manager did not load: {e}") from e
    try:
        # As main_ppo builds them: `data.{split}_files`, capped at `data.{split}_max_samples`.
        train_dataset, val_dataset = (
            create_rl_dataset(
                config.data[f"{split}_files"],
                config.data,
                tokenizer,
                None,
                is_train=split == "train",
                max_samples=config.data.get(f"{split}_max_samples", -1),
            )
            for split in ("train", "val")
        )
        return RayPPOTrainer(
            config=config,
            tokenizer=tokenizer,
            processor=None,
            role_worker_mapping=runner.role_worker_mapping,
            resource_pool_manager=runner.init_resource_pool_mgr(config),
            ray_worker_group_cls=worker_group_cls,
            reward_fn=reward_fn,
            val_reward_fn=val_reward_fn,
            train_dataset=train_dataset,
            val_dataset=val_dataset,
            collate_fn=collate_fn,
            train_sampler=create_rl_sampler(config.data, train_dataset),
        )
    except (AssertionError, ValueError, KeyError, FileNotFoundError) as e:
        raise PreflightError(f"the training data did not load: {e}") from e


def advantage_estimator(config: DictConfig) -> str:
    """The name of the function `compute_advantage` will call for `algorithm.adv_estimator`."""
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn

    estimator = config.algorithm.adv_estimator
    if estimator in ("gae", "grpo"):  # hard-wired in ray_trainer.compute_advantage
        return estimator
    try:
        return get_adv_estimator_fn(estimator).__name__
    except ValueError as e:
        raise PreflightError(f"unknown advantage estimator: {e}") from e


def describe(trainer: Any, tokenizer: Any) -> dict[str, Any]:
    """What the trainer was built with: reward manager, step count and the first training prompt."""
    dataset = trainer.train_dataset
    first = dataset[0]
    mask = first["attention_mask"].bool()
    return {
        "reward_manager": type(trainer.reward_fn).__name__,
        "total_training_steps": trainer.total_training_steps,
        "train_batches_per_epoch": len(trainer.train_dataloader),
        "dataset": {
            "rows": len(dataset),
            "first_prompt_tokens": int(mask.sum()),
            "first_prompt_text": tokenizer.decode(first["input_ids"][mask]),
            "first_ground_truth": first["reward_model"]["ground_truth"],
        },
    }


def _select(config: DictConfig, key: str) -> Any:
    value = OmegaConf.select(config, key)
    return OmegaConf.to_container(value) if isinstance(value, DictConfig | ListConfig) else value


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tokenizer", default=None, help="tokenizer dir or Hub id (default: the model's)")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, key=value (after --)")
    args = parser.parse_args(argv)

    try:
        config = compose_config(args.overrides)
        from verl.utils import hf_tokenizer

        tokenizer = hf_tokenizer(args.tokenizer or config.actor_rollout_ref.model.path)
        trainer = build_trainer(config, tokenizer)
        report: dict[str, Any] = {"config": {key: _select(config, key) for key in REPORTED_KEYS}}
        report["adv_estimator"] = advantage_estimator(config)
        report.update(describe(trainer, tokenizer))
    except PreflightError as e:
        sys.exit(f"Error: {e}")
    json.dump(report, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
