"""Fixtures: real TRL and verl training runs on the tiny model, in the hubkit run layout.

`make_trl_run` and `make_verl_run` are plain functions so that other tests and benchmarks can make runs
of other lengths; the session fixtures `trl_run_dir` and `verl_run_dir` make one of each and are reused.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from hubkit.runs.manifest import Hardware, LoraSettings, Manifest

REPO_ROOT = Path(__file__).resolve().parents[1]
VERL_PYTHON = REPO_ROOT / ".venv-verl" / "bin" / "python"
VERL_TORCHRUN = REPO_ROOT / ".venv-verl" / "bin" / "torchrun"
VERL_SCRIPTS = Path(__file__).resolve().parent / "verl_scripts"

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
LORA_R = 8
LORA_ALPHA = 16
TRL_STEPS = 3
VERL_STEPS = 4
VERL_SAVE_FREQ = 2
# The GRPOConfig settings of every tiny training run on CPU: its size (4 completions a prompt, 12 tokens
# each; the manifest records these) and how it runs (fp32, plain AdamW, a log line a step, no progress bars).
# Callers add the output folder, steps, learning rate and seed.
TINY_GRPO_SIZES: dict[str, int] = {
    "per_device_train_batch_size": 4,
    "num_generations": 4,
    "max_completion_length": 12,
}
TINY_GRPO_ARGS: dict[str, object] = {
    **TINY_GRPO_SIZES,
    "logging_steps": 1,
    "use_cpu": True,
    "bf16": False,
    "optim": "adamw_torch",
    "gradient_checkpointing": False,
    "disable_tqdm": True,
}
# Short arithmetic prompts: the tiny random model answers nonsense, the reward only needs text to score.
PROMPTS = [
    f"What is {a} + {b}?" for a, b in [(2, 3), (7, 5), (11, 4), (9, 9), (6, 1), (8, 13), (3, 14), (10, 2)]
]


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def even_token_reward(completion_ids: list[list[int]], **_: object) -> list[float]:
    """Share of even token ids in each completion.

    A random model's 0/1 rewards are constant within a group, so the group-normalized advantage (and the
    gradient) would be zero; this content-dependent score varies between completions (research: trl.md §5).
    """
    return [sum(1 for i in ids if i % 2 == 0) / max(len(ids), 1) for ids in completion_ids]


def make_trl_run(
    run_dir: Path,
    model_dir: Path,
    base_model: str,
    steps: int = TRL_STEPS,
    seed: int = 0,
    callbacks: list | None = None,
) -> Path:
    """Train `steps` real GRPO steps with TRL + PEFT LoRA on CPU, saving a checkpoint every step.

    Args:
        run_dir: the run directory to create (``hubkit.json`` + ``checkpoints/checkpoint-N/``).
        model_dir: a local model directory (config, weights, tokenizer with chat template).
        base_model: the Hub id the run is published against (the manifest names it, not `model_dir`).
        steps: training steps (one checkpoint each).
        seed: the training seed (LoRA init and sampling).
        callbacks: `TrainerCallback`s for the trainer (the finished time is recorded after them).

    Returns:
        `run_dir`.
    """
    import trl
    from datasets import Dataset
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer

    run_dir.mkdir(parents=True, exist_ok=True)
    hyperparameters: dict[str, float | int | str] = {
        "learning_rate": 5e-3,
        "max_steps": steps,
        **TINY_GRPO_SIZES,
        "seed": seed,
    }
    manifest = Manifest(
        run_id=run_dir.name,
        framework="trl",
        framework_version=trl.__version__,
        base_model=base_model,
        lora=LoraSettings(r=LORA_R, alpha=LORA_ALPHA, target_modules=LORA_TARGETS),
        hyperparameters=hyperparameters,
        hardware=Hardware(accelerator="cpu", count=1, nodes=1),
        started_at=_now(),
        checkpoints_dir="checkpoints",
    )
    manifest.save(run_dir)
    config = GRPOConfig(
        output_dir=str(run_dir / "checkpoints"),
        max_steps=steps,
        save_steps=1,
        learning_rate=hyperparameters["learning_rate"],
        report_to="none",
        seed=seed,
        **TINY_GRPO_ARGS,
    )
    trainer = GRPOTrainer(
        model=str(model_dir),
        reward_funcs=[even_token_reward],
        args=config,
        callbacks=callbacks,
        train_dataset=Dataset.from_dict({"prompt": PROMPTS}),
        peft_config=LoraConfig(
            r=LORA_R,
            lora_alpha=LORA_ALPHA,
            lora_dropout=0.0,
            target_modules=list(LORA_TARGETS),
            task_type="CAUSAL_LM",
        ),
    )
    trainer.train()
    manifest.with_updates(finished_at=_now()).save(run_dir)
    return run_dir


@pytest.fixture(scope="session")
def trl_run_dir(tmp_path_factory: pytest.TempPathFactory, tiny_qwen3) -> Path:
    """A real 3-step TRL GRPO run (checkpoint every step) on the tiny Qwen3, manifest naming its Hub id."""
    run_dir = tmp_path_factory.mktemp("trl-runs") / "tiny-qwen3-trl-grpo"
    return make_trl_run(run_dir, Path(tiny_qwen3.local_dir), tiny_qwen3.repo_id)


def verl_available() -> bool:
    """True when verl 0.6.1's own environment is installed (``make venv-verl``)."""
    return VERL_TORCHRUN.is_file() and (REPO_ROOT / ".venv-verl" / ".installed").is_file()


def _verl_version() -> str | None:
    site_packages = list((REPO_ROOT / ".venv-verl" / "lib").glob("python*/site-packages"))
    for dist_info in site_packages[0].glob("verl-*.dist-info") if site_packages else ():
        return dist_info.name.removeprefix("verl-").removesuffix(".dist-info")
    return None


def verl_reference_dir(run_dir: Path) -> Path:
    """Where `make_verl_run` puts the trained model's reference logits (``global_step_N.pt``), beside the run."""
    return run_dir.parent / f"{run_dir.name}-reference"


def make_verl_run(
    run_dir: Path,
    model_dir: Path,
    tokenizer_dir: Path,
    base_model: str,
    steps: int = VERL_STEPS,
    save_freq: int = VERL_SAVE_FREQ,
) -> Path:
    """Train a real verl 0.6.1 FSDP2 LoRA run on 2 CPU ranks (torchrun, gloo) in verl's own environment.

    Args:
        run_dir: the run directory to create (``hubkit.json``, ``metrics.jsonl``, ``checkpoints/``).
        model_dir: a local model directory loadable by transformers 4.x.
        tokenizer_dir: tokenizer files loadable by transformers 4.x (the real Qwen3 tokenizer).
        base_model: the Hub id the manifest names.
        steps: training steps.
        save_freq: save every this many steps (and at the last step).

    Returns:
        `run_dir`. Reference logits of the trained model are in `verl_reference_dir(run_dir)`.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    started_at = _now()
    env = {**os.environ, "VERL_FILE_LOGGER_PATH": str(run_dir / "metrics.jsonl"), "OMP_NUM_THREADS": "1"}
    command = [
        str(VERL_TORCHRUN),
        "--standalone",
        "--nproc_per_node=2",
        str(VERL_SCRIPTS / "make_verl_run.py"),
        f"--model-dir={model_dir}",
        f"--tokenizer-dir={tokenizer_dir}",
        f"--out={run_dir / 'checkpoints'}",
        f"--reference-dir={verl_reference_dir(run_dir)}",
        f"--steps={steps}",
        f"--save-freq={save_freq}",
        f"--lora-r={LORA_R}",
        f"--lora-alpha={LORA_ALPHA}",
    ]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"verl training script failed ({result.returncode}):\n{result.stderr[-4000:]}")
    Manifest(
        run_id=run_dir.name,
        framework="verl",
        framework_version=_verl_version(),
        base_model=base_model,
        lora=LoraSettings(r=LORA_R, alpha=LORA_ALPHA, target_modules=LORA_TARGETS),
        hyperparameters={"max_steps": steps, "save_freq": save_freq, "learning_rate": 1e-2},
        hardware=Hardware(accelerator="cpu", count=2, nodes=1),
        started_at=started_at,
        finished_at=_now(),
        checkpoints_dir="checkpoints",
        metrics_file="metrics.jsonl",
    ).save(run_dir)
    return run_dir


@pytest.fixture(scope="session")
def verl_run_dir(tmp_path_factory: pytest.TempPathFactory, tiny_qwen3, qwen3_tokenizer_dir) -> Path:
    """A real verl 0.6.1 run (4 steps, saves at 2 and 4) on the tiny Qwen3, manifest naming its Hub id."""
    if not verl_available():
        pytest.skip("verl 0.6.1's environment .venv-verl is missing: run `make venv-verl`")
    run_dir = tmp_path_factory.mktemp("verl-runs") / "tiny-qwen3-verl-grpo"
    return make_verl_run(run_dir, Path(tiny_qwen3.local_dir), Path(qwen3_tokenizer_dir), tiny_qwen3.repo_id)


def copy_verl_run(run_dir: Path, dest: Path) -> Path:
    """A copy of a verl run without optimizer/extra state (never read by hubkit), with its reference logits."""
    shutil.copytree(run_dir, dest, ignore=shutil.ignore_patterns("optim_*", "extra_state_*"))
    shutil.copytree(verl_reference_dir(run_dir), verl_reference_dir(dest))
    return dest


def empty_first_adapter(run_dir: Path) -> Path:
    """Replace the first step's ``lora_adapter/`` weights with what verl 0.6.1 + PEFT >= 0.21 writes: no tensors."""
    from safetensors.torch import save_file

    first = min((run_dir / "checkpoints").glob("global_step_*"), key=lambda p: int(p.name.rsplit("_", 1)[1]))
    save_file({}, first / "actor" / "lora_adapter" / "adapter_model.safetensors")
    return run_dir


def drop_adapters_for_meta(run_dir: Path) -> Path:
    """Make the run look like verl >= 0.8's: no ``lora_adapter/``, ``lora_train_meta.json`` instead."""
    for actor in (run_dir / "checkpoints").glob("global_step_*/actor"):
        shutil.rmtree(actor / "lora_adapter")
        (actor / "lora_train_meta.json").write_text(
            json.dumps({"r": LORA_R, "lora_alpha": LORA_ALPHA, "task_type": "CAUSAL_LM"})
        )
    return run_dir


@pytest.fixture(scope="session")
def verl_empty_adapter_run_dir(tmp_path_factory: pytest.TempPathFactory, verl_run_dir: Path) -> Path:
    """`verl_run_dir` with its first step's ``lora_adapter/adapter_model.safetensors`` empty (16 bytes)."""
    dest = tmp_path_factory.mktemp("verl-variants") / "tiny-qwen3-verl-empty-adapter"
    return empty_first_adapter(copy_verl_run(verl_run_dir, dest))


@pytest.fixture(scope="session")
def verl_no_adapter_run_dir(tmp_path_factory: pytest.TempPathFactory, verl_run_dir: Path) -> Path:
    """`verl_run_dir` as newer verl saves it: no ``lora_adapter/``, ``lora_train_meta.json`` per step."""
    dest = tmp_path_factory.mktemp("verl-variants") / "tiny-qwen3-verl-no-adapter"
    return drop_adapters_for_meta(copy_verl_run(verl_run_dir, dest))
