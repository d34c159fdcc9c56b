"""Write the run manifest `hubkit.json` of a verl run, before training (`start`) and after it (`finish`).

`launch.sh` calls this with the exact Hydra overrides it hands to verl, so the manifest records what verl
was told, not a second copy of the settings. `start` also copies the training-problem hashes that
prepare_data.py wrote beside the dataset info into the run::

    python write_manifest.py start --run-dir runs/RUN --dataset-info data/x/dataset_info.json \\
        --base-model Qwen/Qwen3-4B --lambda 0.5 --aggregation sum_then_normalize -- key=value ...
    python write_manifest.py finish --run-dir runs/RUN

It uses hubkit's light core only (it runs in verl's environment).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from prepare_data import SYSTEM_PROMPT

from hubkit.errors import HubkitError, ManifestError
from hubkit.rewards.spec import deepscaler_length_penalty
from hubkit.runs.manifest import DatasetInfo, Hardware, JSONScalar, LoraSettings, Manifest, SweepInfo
from hubkit.runs.problem_hashes import TRAIN_PROBLEM_HASHES_NAME

METRICS_FILE = "metrics.jsonl"
# Manifest hyperparameter name -> the Hydra key it is read from.
HYPERPARAMETER_KEYS: dict[str, str] = {
    "learning_rate": "actor_rollout_ref.actor.optim.lr",
    "lr_scheduler": "actor_rollout_ref.actor.optim.lr_scheduler_type",
    "warmup_steps": "actor_rollout_ref.actor.optim.lr_warmup_steps",
    "optimizer": "actor_rollout_ref.actor.optim.optimizer",
    "weight_decay": "actor_rollout_ref.actor.optim.weight_decay",
    "adam_betas": "actor_rollout_ref.actor.optim.betas",
    "max_grad_norm": "actor_rollout_ref.actor.grad_clip",
    "kl_coef": "actor_rollout_ref.actor.kl_loss_coef",
    "use_kl_loss": "actor_rollout_ref.actor.use_kl_loss",
    "ppo_epochs": "actor_rollout_ref.actor.ppo_epochs",
    "clip_ratio": "actor_rollout_ref.actor.clip_ratio",
    "loss_agg_mode": "actor_rollout_ref.actor.loss_agg_mode",
    "temperature": "actor_rollout_ref.rollout.temperature",
    "top_p": "actor_rollout_ref.rollout.top_p",
    "prompts_per_step": "data.train_batch_size",
    "rollouts_per_prompt": "actor_rollout_ref.rollout.n",
    "max_prompt_length": "data.max_prompt_length",
    "max_completion_length": "data.max_response_length",
    "max_steps": "trainer.total_training_steps",
    "save_steps": "trainer.save_freq",
    "advantage_estimator": "algorithm.adv_estimator",
    "training_engine": "actor_rollout_ref.actor.strategy",
    "rollout_engine": "actor_rollout_ref.rollout.name",
    "gpus_per_node": "trainer.n_gpus_per_node",
    "nodes": "trainer.nnodes",
}


Value = JSONScalar | list[JSONScalar]


def _scalar(text: str) -> JSONScalar:
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("null", "none", "~"):
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text.strip("'\"")


def parse_value(text: str) -> Value:
    """A Hydra override value as JSON data: bools, null, ints, floats, flat `[a,b]` lists, else the string."""
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        inner = text[1:-1].strip()
        return [_scalar(item.strip()) for item in inner.split(",")] if inner else []
    return _scalar(text)


def parse_overrides(overrides: list[str]) -> dict[str, Value]:
    """`key=value` overrides (leading `+`/`++` dropped) as a dict; a later override of a key wins.

    Raises:
        ManifestError: an override has no `=`.
    """
    parsed: dict[str, Value] = {}
    for override in overrides:
        key, sep, value = override.partition("=")
        if not sep:
            raise ManifestError(f"not a Hydra override (key=value): {override!r}")
        parsed[key.lstrip("+")] = parse_value(value)
    return parsed


def _required(config: dict[str, Value], key: str) -> Value:
    if key not in config:
        raise ManifestError(f"the launch overrides do not set {key}: the manifest cannot record it")
    return config[key]


def _required_number(config: dict[str, Value], key: str, kind: type[int] | type[float]) -> int | float:
    value = _required(config, key)
    # bool is an int subclass; an int is a fine float
    if isinstance(value, bool) or not isinstance(value, int if kind is int else (int, float)):
        raise ManifestError(f"{key} must be {'an integer' if kind is int else 'a number'}, got {value!r}")
    return kind(value)


def _accelerator() -> str:
    """The accelerator's name as the driver reports it ("NVIDIA H100 80GB HBM3"), or "cpu"."""
    try:
        import torch
    except ImportError:
        return "unknown"
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def build_manifest(
    run_id: str,
    overrides: list[str],
    dataset: DatasetInfo,
    base_model: str,
    lam: float,
    aggregation: str,
    accelerator: str,
    framework_version: str | None,
    push_to: str | None = None,
    sweep: str | None = None,
) -> Manifest:
    """The manifest of a run launched with `overrides` (the Hydra overrides verl receives).

    Raises:
        ManifestError: an override the manifest needs is missing, or a value is invalid.
    """
    config = parse_overrides(overrides)
    hyperparameters = {name: _required(config, key) for name, key in HYPERPARAMETER_KEYS.items()}
    prompts = _required_number(config, "data.train_batch_size", int)
    rollouts = _required_number(config, "actor_rollout_ref.rollout.n", int)
    hyperparameters["completions_per_step"] = prompts * rollouts
    gpus = _required_number(config, "trainer.n_gpus_per_node", int)
    nodes = _required_number(config, "trainer.nnodes", int)
    max_len = _required_number(config, "data.max_response_length", int)
    targets = _required(config, "actor_rollout_ref.model.target_modules")
    return Manifest(
        run_id=run_id,
        framework="verl",
        framework_version=framework_version,
        base_model=base_model,
        dataset=dataset,
        reward=deepscaler_length_penalty(lam=lam, max_len=int(max_len), aggregation=aggregation),
        lora=LoraSettings(
            r=int(_required_number(config, "actor_rollout_ref.model.lora_rank", int)),
            alpha=_required_number(config, "actor_rollout_ref.model.lora_alpha", float),
            target_modules=tuple(str(t) for t in targets) if isinstance(targets, list) else (str(targets),),
        ),
        hyperparameters=hyperparameters,
        # count: all accelerators of the run (per node x nodes)
        hardware=Hardware(accelerator=accelerator, count=int(gpus * nodes), nodes=int(nodes)),
        started_at=_now(),
        system_prompt=SYSTEM_PROMPT,
        checkpoints_dir=".",
        metrics_file=METRICS_FILE,
        push_to=push_to,
        # A sweep of this recipe varies the length penalty's weight (sweep.sh).
        sweep=SweepInfo(sweep, "length_penalty_weight", lam) if sweep else None,
    )


def _framework_version() -> str | None:
    try:
        return version("verl")
    except PackageNotFoundError:
        return None


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("start", help="write hubkit.json before training")
    start.add_argument("--run-dir", type=Path, required=True)
    start.add_argument("--dataset-info", type=Path, required=True, help="written by prepare_data.py")
    start.add_argument("--base-model", required=True, help="the Hub id of the base model")
    start.add_argument("--lambda", dest="lam", type=float, required=True, help="length-penalty weight")
    start.add_argument("--aggregation", required=True, choices=("sum_then_normalize", "normalize_then_sum"))
    start.add_argument("--accelerator", default=None, help="default: what torch reports")
    start.add_argument("--push-to", default=None, help="the adapter repo to publish to (owner/name)")
    start.add_argument("--sweep", default=None, help="the sweep this run is one point of (sweep.sh)")
    start.add_argument("overrides", nargs="*", help="the Hydra overrides verl gets (after --)")
    finish = commands.add_parser("finish", help="set finished_at after training")
    finish.add_argument("--run-dir", type=Path, required=True)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = _parse_args(argv)
    try:
        if args.command == "start":
            try:
                dataset = DatasetInfo(**json.loads(args.dataset_info.read_text()))
            except FileNotFoundError as e:
                raise ManifestError(f"no {args.dataset_info}: run prepare_data.py first") from e
            manifest = build_manifest(
                run_id=args.run_dir.name,
                overrides=args.overrides,
                dataset=dataset,
                base_model=args.base_model,
                lam=args.lam,
                aggregation=args.aggregation,
                accelerator=args.accelerator or _accelerator(),
                framework_version=_framework_version(),
                push_to=args.push_to,
                sweep=args.sweep,
            )
            args.run_dir.mkdir(parents=True, exist_ok=True)
            manifest.save(args.run_dir)
            hashes = args.dataset_info.with_name(TRAIN_PROBLEM_HASHES_NAME)
            if hashes.is_file():
                shutil.copyfile(hashes, args.run_dir / TRAIN_PROBLEM_HASHES_NAME)
        else:
            manifest = Manifest.load(args.run_dir)
            manifest.with_updates(finished_at=_now()).save(args.run_dir)
    except HubkitError as e:
        sys.exit(f"Error: {e}")


if __name__ == "__main__":
    main()
