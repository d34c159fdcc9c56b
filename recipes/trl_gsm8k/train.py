"""GRPO on GSM8K with TRL 1.16: the seed run's setup, writing a run directory that `hubkit push` publishes.

Qwen/Qwen2.5-3B-Instruct, 4-bit QLoRA (r=32, alpha=32 on q,k,v,o,gate,up,down), the four GSM8K rewards of
hubkit.rewards, 8 completions per prompt sampled with vLLM, lr 5e-6 cosine with 10 % warmup, 8-bit AdamW,
prompts of at most 256 tokens, completions up to 768, 1000 steps, a checkpoint every 20, seed 3407.
Only the GSM8K train split is ever loaded: loading a test split fails the run.

    python recipes/trl_gsm8k/train.py                          # the seed run (one GPU, vLLM colocated)
    accelerate launch --num_processes 4 recipes/trl_gsm8k/train.py   # same run, 4 GPUs
    python recipes/trl_gsm8k/train.py --dry-run                # print the manifest and TRL settings
    python recipes/trl_gsm8k/train.py --tiny --model ORG/TINY --problems-file problems.jsonl   # CPU smoke run

The run goes to `runs/<run_id>/` (checkpoint-N/ and hubkit.json); publish it with
`hubkit push --run-id <run_id> --repo-id <you>/qwen2.5-3b-grpo-gsm8k`.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hubkit.errors import HubkitError
from hubkit.rewards.gsm8k import SYSTEM_PROMPT  # the seed run's, verbatim
from hubkit.rewards.spec import RewardComponent, RewardSpec, gsm8k_seed
from hubkit.runs.manifest import DatasetInfo, Hardware, LoraSettings, Manifest, SweepInfo
from hubkit.runs.problem_hashes import write_train_problem_hashes

logger = logging.getLogger("trl_gsm8k")

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class RecipeError(HubkitError):
    """The recipe cannot run as asked: a test split was loaded, no prompt fits, the batch does not divide."""


@dataclass(frozen=True)
class RecipeConfig:
    """Every setting of the run; the manifest records all of them."""

    model: str = "Qwen/Qwen2.5-3B-Instruct"
    dataset_id: str = "openai/gsm8k"
    dataset_config: str = "main"
    dataset_revision: str | None = None
    lora_r: int = 32
    lora_alpha: int = 32
    learning_rate: float = 5e-6
    lr_scheduler: str = "cosine"
    warmup_ratio: float = 0.1
    optimizer: str = "adamw_8bit"
    adam_beta1: float = 0.9
    adam_beta2: float = 0.99
    weight_decay: float = 0.001
    max_grad_norm: float = 0.1
    num_generations: int = 8
    # Unsloth silently turned the seed's batch of 1 into 1 prompt x 8 completions per step; written out here.
    prompts_per_step: int = 1
    max_prompt_length: int = 256
    max_completion_length: int = 768
    max_steps: int = 1000
    save_steps: int = 20
    seed: int = 3407
    temperature: float = 1.0
    kl_coef: float = 0.0
    quantization: str = "4bit-nf4"  # or "none"
    use_vllm: bool = True
    vllm_gpu_memory_utilization: float = 0.5
    gradient_checkpointing: bool = True
    use_cpu: bool = False  # train on the CPU (transformers refuses bf16 without a GPU unless told so)
    tiny: bool = False
    signal_reward: bool = False  # add tiny_signal_reward (a random model scores 0 on every GSM8K reward)
    # A length penalty, weight × (−tokens / max_completion_length), beside the four rewards (0: none).
    length_penalty_weight: float = 0.0
    sweep: str | None = None  # the sweep this run is one point of (recorded in the manifest)
    sweep_over: str = "length_penalty_weight"  # the setting the sweep varies: this or "seed"

    def __post_init__(self) -> None:
        if self.quantization not in ("4bit-nf4", "none"):
            raise RecipeError(f"quantization must be '4bit-nf4' or 'none', got {self.quantization!r}")
        if self.length_penalty_weight < 0:
            raise RecipeError(f"the length penalty's weight is 0 or more, got {self.length_penalty_weight}")
        if self.sweep_over not in ("length_penalty_weight", "seed"):
            raise RecipeError(f"a sweep varies length_penalty_weight or seed, not {self.sweep_over!r}")

    @property
    def reward(self) -> RewardSpec:
        """The seed's four rewards, and the length penalty when it has a weight (TRL's own aggregation)."""
        spec = gsm8k_seed()
        if not self.length_penalty_weight:
            return spec
        penalty = RewardComponent(
            "length_penalty",
            self.length_penalty_weight,
            {"max_completion_length": self.max_completion_length},
        )
        return replace(spec, components=(*spec.components, penalty))

    @property
    def sweep_info(self) -> SweepInfo | None:
        if self.sweep is None:
            return None
        return SweepInfo(self.sweep, self.sweep_over, getattr(self, self.sweep_over))


def tiny_config(model: str, max_steps: int) -> RecipeConfig:
    """The CPU smoke-run variant: the given tiny model, no quantization, no vLLM, short completions."""
    return replace(
        RecipeConfig(),
        model=model,
        optimizer="adamw_torch",  # adamw_8bit needs bitsandbytes and a GPU
        quantization="none",
        use_vllm=False,
        num_generations=4,
        max_completion_length=8,
        max_steps=max_steps,
        save_steps=1,
        learning_rate=5e-3,  # large enough that 3 steps visibly move a tiny adapter
        warmup_ratio=0.0,  # with 3 steps, 10 % warmup would make step 1 a no-op (learning rate 0)
        gradient_checkpointing=False,
        use_cpu=True,
        tiny=True,
        signal_reward=True,
    )


# --- data ----------------------------------------------------------------------------------------


def _refuse_test_split(split: Any) -> None:
    """Raise unless `split` names the train split only (no split at all means every split, test included)."""
    name = str(split).split("[")[0].strip() if split is not None else None
    if name != "train":
        raise RecipeError(f"refusing to load split {split!r}: this recipe trains on GSM8K's train split only")


@contextlib.contextmanager
def train_split_only() -> Iterator[None]:
    """While active, any split other than "train" that the `datasets` library materializes fails the run.

    `load_dataset` always goes through `DatasetBuilder.as_dataset` (or `as_streaming_dataset`), whoever
    calls it and however it was imported, so the guard sits there: a test split cannot be loaded by a
    callback or evaluation hook of the run without stopping it.
    """
    from datasets import DatasetBuilder

    originals = {name: getattr(DatasetBuilder, name) for name in ("as_dataset", "as_streaming_dataset")}

    def guard(original: Any) -> Any:
        def guarded(self: Any, split: Any = None, *args: Any, **kwargs: Any) -> Any:
            _refuse_test_split(split)
            return original(self, split, *args, **kwargs)

        return guarded

    for name, original in originals.items():
        setattr(DatasetBuilder, name, guard(original))
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(DatasetBuilder, name, original)


def load_problems(config: RecipeConfig, problems_file: Path | None) -> tuple[Any, str | None]:
    """GSM8K's train split (or a local file of `question`/`answer` rows); returns it and the Hub revision."""
    import datasets

    if problems_file is not None:
        data = datasets.load_dataset("json", data_files={"train": str(problems_file)}, split="train")
        return data, None
    from huggingface_hub import HfApi

    revision = HfApi().dataset_info(config.dataset_id, revision=config.dataset_revision).sha
    # Only the train files are named, so the test split is never even downloaded
    # (openai/gsm8k keeps each config's splits as <config>/<split>-*.parquet).
    data = datasets.load_dataset(
        config.dataset_id,
        data_files={"train": f"{config.dataset_config}/train-*"},
        split="train",
        revision=revision,
    )
    return data, revision


def to_prompts(problems: Any, tokenizer: Any, max_prompt_length: int) -> Any:
    """Chat prompts (system + question) with the gold answer, keeping those of at most `max_prompt_length` tokens.

    TRL 1.16 no longer truncates prompts (`max_prompt_length` was removed), so longer ones are dropped here.
    """

    def as_prompt(row: dict[str, Any]) -> dict[str, Any]:
        prompt = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": row["question"]}]
        ids = tokenizer.apply_chat_template(
            prompt, tokenize=True, add_generation_prompt=True, return_dict=False
        )
        return {"prompt": prompt, "answer": row["answer"], "prompt_tokens": len(ids)}

    mapped = problems.map(as_prompt, remove_columns=problems.column_names)
    kept = mapped.filter(lambda row: row["prompt_tokens"] <= max_prompt_length)
    if len(kept) == 0:
        raise RecipeError(f"no prompt fits in {max_prompt_length} tokens")
    return kept.remove_columns("prompt_tokens")


def content_sha256(prompts: Any) -> str:
    """A hash of what training sees (questions and gold answers, in order)."""
    digest = hashlib.sha256()
    for row in prompts:
        line = json.dumps({"question": row["prompt"][-1]["content"], "answer": row["answer"]}, sort_keys=True)
        digest.update(line.encode() + b"\n")
    return digest.hexdigest()


def record_train_problems(run_dir: Path, prompts: Any) -> Path:
    """Write the normalized-text hashes of the training questions into the run (published with it), so that
    `hubkit eval` and anyone with the release can check a benchmark against them."""
    return write_train_problem_hashes(run_dir, (row["prompt"][-1]["content"] for row in prompts))


# --- TRL settings --------------------------------------------------------------------------------


def world_size() -> int:
    """Processes in the run (accelerate and torchrun set WORLD_SIZE)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def grpo_config_kwargs(config: RecipeConfig, output_dir: Path, world: int) -> dict[str, Any]:
    """The `GRPOConfig` arguments, reward-independent part (hubkit.rewards.trl adds the reward's).

    Raises:
        RecipeError: the completions per step do not split evenly over the processes.
    """
    completions_per_step = config.prompts_per_step * config.num_generations
    if completions_per_step % world:
        raise RecipeError(f"{completions_per_step} completions per step do not split over {world} processes")
    kwargs: dict[str, Any] = {
        "output_dir": str(output_dir),
        "seed": config.seed,
        "max_steps": config.max_steps,
        "learning_rate": config.learning_rate,
        "lr_scheduler_type": config.lr_scheduler,
        # transformers 5 removed warmup_ratio; a float below 1 is read as a fraction of the steps.
        "warmup_steps": config.warmup_ratio,
        "optim": config.optimizer,
        "adam_beta1": config.adam_beta1,
        "adam_beta2": config.adam_beta2,
        "weight_decay": config.weight_decay,
        "max_grad_norm": config.max_grad_norm,
        "per_device_train_batch_size": completions_per_step // world,
        "gradient_accumulation_steps": 1,
        "num_generations": config.num_generations,
        "max_completion_length": config.max_completion_length,
        "temperature": config.temperature,
        "beta": config.kl_coef,
        "gradient_checkpointing": config.gradient_checkpointing,
        "save_strategy": "steps",
        "save_steps": config.save_steps,
        "logging_steps": 1,
        "report_to": "none",
        # Each step's completions saved as <output_dir>/completions/completions_<step>.parquet: `hubkit push`
        # publishes the first 64 of each step in the <repo>-samples dataset (config "rollouts").
        "log_completions": True,
        "num_completions_to_print": 1,
        # Keep the `answer` column: the correctness reward reads it.
        "remove_unused_columns": False,
    }
    if config.use_vllm:
        kwargs |= {
            "use_vllm": True,
            "vllm_mode": "colocate",
            "vllm_max_model_length": config.max_prompt_length + config.max_completion_length,
            "vllm_gpu_memory_utilization": config.vllm_gpu_memory_utilization,
        }
    if config.use_cpu:
        kwargs["use_cpu"] = True
    if config.tiny:
        kwargs |= {"bf16": False, "disable_tqdm": True}
    else:
        kwargs |= {"bf16": True, "model_init_kwargs": {"dtype": "bfloat16"}}
    return kwargs


def hyperparameters(config: RecipeConfig, world: int) -> dict[str, Any]:
    """Every training setting as the manifest records it (model, data and LoRA have their own fields)."""
    skip = {"model", "dataset_id", "dataset_config", "dataset_revision", "lora_r", "lora_alpha"}
    values = {k: v for k, v in asdict(config).items() if k not in skip}
    values["completions_per_step"] = config.prompts_per_step * config.num_generations
    values["processes"] = world
    values["rollout_engine"] = "vllm" if config.use_vllm else "transformers"
    if config.signal_reward:
        values["extra_reward"] = "tiny_signal_reward (smoke run only)"
    return values


def _accelerator() -> str:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def build_manifest(
    config: RecipeConfig,
    run_id: str,
    dataset: DatasetInfo,
    accelerator: str,
    world: int,
    push_to: str | None = None,
) -> Manifest:
    """The run manifest written before training starts (finished_at is set when it ends)."""
    import trl

    return Manifest(
        run_id=run_id,
        framework="trl",
        framework_version=trl.__version__,
        base_model=config.model,
        dataset=dataset,
        reward=config.reward,
        lora=LoraSettings(r=config.lora_r, alpha=config.lora_alpha, target_modules=LORA_TARGETS),
        hyperparameters=hyperparameters(config, world),
        # torchrun/accelerate set GROUP_WORLD_SIZE to the number of nodes.
        hardware=Hardware(
            accelerator=accelerator, count=world, nodes=int(os.environ.get("GROUP_WORLD_SIZE", "1"))
        ),
        started_at=_now(),
        system_prompt=SYSTEM_PROMPT,
        checkpoints_dir=".",
        push_to=push_to,
        sweep=config.sweep_info,
    )


# --- the run -------------------------------------------------------------------------------------


def tiny_signal_reward(completion_ids: list[list[int]], **_: Any) -> list[float]:
    """Share of even token ids in a completion: a smoke-run-only learning signal.

    A random tiny model scores 0 on every GSM8K reward, so every group has zero variance, the advantage is 0
    and LoRA would not move. `--tiny` adds this reward (recorded in the manifest) so the steps really train.
    """
    return [sum(1 for i in ids if i % 2 == 0) / max(len(ids), 1) for ids in completion_ids]


def dataset_info(
    config: RecipeConfig, prompts: Any, revision: str | None, problems_file: Path | None
) -> DatasetInfo:
    """What the manifest records about the training prompts (a local file is named, never its path)."""
    return DatasetInfo(
        id=config.dataset_id if problems_file is None else problems_file.name,
        config=config.dataset_config if problems_file is None else None,
        split="train",
        revision=revision,
        filter=f"prompt <= {config.max_prompt_length} tokens after the chat template",
        num_rows=len(prompts),
        content_sha256=content_sha256(prompts),
    )


def _quantization_config(config: RecipeConfig) -> Any:
    """4-bit NF4 with double quantization and bf16 compute (QLoRA), or None."""
    if config.quantization == "none":
        return None
    import torch
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_compute_dtype=torch.bfloat16,
        bnb_4bit_use_double_quant=True,
    )


def train(
    config: RecipeConfig,
    run_dir: Path,
    problems_file: Path | None,
    push_to: str | None = None,
    on_log: Callable[[int, dict[str, float]], None] | None = None,
) -> Path:
    """Prepare the data, write the manifest, train, and mark the manifest finished.

    With `push_to`, every checkpoint is published while training runs (`HubkitPushCallback`), and the
    final step and the merged model when it ends. With `on_log`, each step's logged metrics go to it
    (with the step number) instead of being printed as a dict (what `--tiny` does otherwise).

    Returns:
        `run_dir`.

    Raises:
        RecipeError: the run directory already holds checkpoints, or the data or settings are unusable.
    """
    if any(run_dir.glob("checkpoint-*")):  # checked before the heavy imports: fail fast
        raise RecipeError(f"{run_dir} already holds checkpoints: choose a new --run-id")
    from peft import LoraConfig
    from transformers import AutoTokenizer, PrinterCallback, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from hubkit.integrations.trl import HubkitPushCallback
    from hubkit.rewards import trl as hubkit_trl
    from hubkit.rewards.build import build

    world = world_size()
    spec = config.reward
    # The seed's aggregation is TRL's own (group z-score, unbiased std, +1e-4), so plain GRPOTrainer computes
    # exactly hubkit's advantages; hubkit_trl.HubkitGRPOTrainer would be needed otherwise.
    if not hubkit_trl.trl_matches(spec):
        raise RecipeError("the reward spec needs HubkitGRPOTrainer: TRL's aggregation differs from it")
    with train_split_only(), build(spec) as reward:
        problems, revision = load_problems(config, problems_file)
        # Left padding and truncation, as GRPOTrainer loads its own processing class.
        tokenizer = AutoTokenizer.from_pretrained(config.model, padding_side="left", truncation_side="left")
        prompts = to_prompts(problems, tokenizer, config.max_prompt_length)

        reward_funcs = hubkit_trl.reward_funcs(reward, ground_truth_column="answer")
        kwargs = grpo_config_kwargs(config, run_dir, world) | hubkit_trl.grpo_config_kwargs(spec)
        if config.signal_reward:
            reward_funcs.append(tiny_signal_reward)
            kwargs["reward_weights"] = [*kwargs["reward_weights"], 1.0]
        args = GRPOConfig(**kwargs)

        dataset = dataset_info(config, prompts, revision, problems_file)
        manifest = build_manifest(config, run_dir.name, dataset, _accelerator(), world, push_to)
        is_main = int(os.environ.get("RANK", "0")) == 0
        if is_main:
            run_dir.mkdir(parents=True, exist_ok=True)
            manifest.save(run_dir)
            record_train_problems(run_dir, prompts)

        class RecordEnd(TrainerCallback):
            """Marks the manifest finished when training ends, before the final push reads it."""

            def on_train_end(self, args: Any, state: Any, control: Any, **_: Any) -> None:
                if is_main:
                    manifest.with_updates(finished_at=_now()).save(run_dir)

        class ReportLog(TrainerCallback):
            """Hands each step's logged metrics to `on_log`."""

            def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **_: Any) -> None:
                if on_log is not None and is_main and logs:
                    on_log(state.global_step, dict(logs))

        callbacks: list[Any] = [RecordEnd()] + ([ReportLog()] if on_log is not None else [])
        if push_to:
            endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
            callbacks.append(HubkitPushCallback(push_to, endpoint=endpoint, run_dir=run_dir))

        trainer = GRPOTrainer(
            model=config.model,
            reward_funcs=reward_funcs,
            args=args,
            train_dataset=prompts,
            processing_class=tokenizer,
            quantization_config=_quantization_config(config),
            peft_config=LoraConfig(
                r=config.lora_r,
                lora_alpha=config.lora_alpha,
                lora_dropout=0.0,
                target_modules=list(LORA_TARGETS),
                task_type="CAUSAL_LM",
            ),
            callbacks=callbacks,
        )
        if on_log is not None:
            trainer.remove_callback(PrinterCallback)
        trainer.train()
    return run_dir


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default=None, help="base model Hub id (default Qwen/Qwen2.5-3B-Instruct)")
    parser.add_argument("--problems-file", type=Path, default=None, help="local question/answer JSON lines")
    parser.add_argument("--dataset-revision", default=None, help="openai/gsm8k revision (default: main)")
    parser.add_argument("--runs-dir", type=Path, default=Path(os.environ.get("HUBKIT_RUNS_DIR", "runs")))
    parser.add_argument("--run-id", default=None, help="default: <UTC time>_gsm8k_grpo")
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument(
        "--prompts-per-step", type=int, default=None, help="default 1 (x 8 completions), as the seed run"
    )
    parser.add_argument("--no-vllm", action="store_true", help="sample with transformers instead of vLLM")
    parser.add_argument("--no-quantization", action="store_true", help="bf16 LoRA instead of 4-bit QLoRA")
    parser.add_argument("--cpu", action="store_true", help="train on the CPU (no GPU needed; slow)")
    parser.add_argument(
        "--optimizer",
        default=None,
        help="a transformers `optim` name (default adamw_8bit, which needs bitsandbytes on CUDA; adamw_torch runs anywhere)",
    )
    parser.add_argument(
        "--tiny", action="store_true", help="CPU smoke run: needs --model and --problems-file"
    )
    parser.add_argument(
        "--push-to",
        metavar="OWNER/NAME",
        default=os.environ.get("PUSH_TO") or None,
        help="publish every checkpoint to this repo while training, and the merged model at the end "
        "(also PUSH_TO; the repo is recorded in hubkit.json, so a later `hubkit push --run-id` needs no --repo-id)",
    )
    parser.add_argument(
        "--length-penalty",
        type=float,
        default=None,
        metavar="WEIGHT",
        help="add weight x (-tokens / max completion length) to the four rewards (default 0: none)",
    )
    parser.add_argument("--seed", type=int, default=None, help="default 3407, the seed run's")
    parser.add_argument(
        "--sweep",
        metavar="NAME",
        help="the sweep this run is one point of: `hubkit push` puts its repos in the Hub Collection NAME, "
        "noted with the varied value",
    )
    parser.add_argument(
        "--sweep-over",
        choices=("length_penalty_weight", "seed"),
        default="length_penalty_weight",
        help="the setting the sweep varies",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the manifest and TRL settings, train nothing"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = _parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.tiny and (args.model is None or args.problems_file is None):
        sys.exit("Error: --tiny needs --model (a tiny model's Hub id) and --problems-file")
    if args.tiny:
        config = tiny_config(args.model, args.max_steps or 3)
    else:
        config = RecipeConfig()
        config = replace(
            config,
            model=args.model or config.model,
            max_steps=args.max_steps or config.max_steps,
            prompts_per_step=args.prompts_per_step or config.prompts_per_step,
            use_vllm=config.use_vllm and not args.no_vllm,
            quantization="none" if args.no_quantization else config.quantization,
            optimizer=args.optimizer or config.optimizer,
            use_cpu=args.cpu,
            dataset_revision=args.dataset_revision,
        )
    config = replace(
        config,
        length_penalty_weight=config.length_penalty_weight
        if args.length_penalty is None
        else args.length_penalty,
        seed=config.seed if args.seed is None else args.seed,
        sweep=args.sweep,
        sweep_over=args.sweep_over,
    )
    run_id = args.run_id or datetime.now(UTC).strftime("%Y%m%d_%H%M%S") + "_gsm8k_grpo"
    run_dir = args.runs_dir.resolve() / run_id
    try:
        if args.dry_run:
            dataset = DatasetInfo(id=config.dataset_id, config=config.dataset_config, split="train")
            manifest = build_manifest(config, run_id, dataset, "unknown", world_size(), args.push_to)
            from hubkit.rewards import trl as hubkit_trl

            grpo = grpo_config_kwargs(config, Path(run_id), world_size())
            report = {
                "manifest": manifest.to_dict(),
                "grpo_config": grpo | hubkit_trl.grpo_config_kwargs(manifest.reward),
            }
            print(json.dumps(report, indent=2))
            return
        train(config, run_dir, args.problems_file, args.push_to)
    except HubkitError as e:
        sys.exit(f"Error: {e}")
    if args.push_to:
        print(
            f"Run written to {run_dir}; checkpoints pushed to {args.push_to} while training (a failed push is logged above: `hubkit push --run-id {run_id}` completes it)"
        )
    else:
        print(f"Run written to {run_dir}\nPublish it with: hubkit push --run-id {run_id}")


if __name__ == "__main__":
    main()
