"""Fixtures: real TRL and verl training runs on the tiny models, in the layouts the frameworks write.

`make_trl_run` (TRL's GRPOTrainer in this process) and `run_verl_recipe` (the verl recipe's launch.sh through
verl's own `main_ppo`, in verl's environment) are plain functions so that other tests and benchmarks can make
runs of other shapes; the session fixtures `trl_run_dir` and `verl_run_dir` make one of each and are reused.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from hubkit.runs.manifest import Hardware, LoraSettings, Manifest
from tests.support import verl_cpu
from tests.support.tiny import TinyModel

REPO_ROOT = Path(__file__).resolve().parents[1]
TEST_DATA = Path(__file__).resolve().parent / "data"
VERL_PYTHON = REPO_ROOT / ".venv-verl" / "bin" / "python"
VERL_RECIPE = REPO_ROOT / "recipes" / "verl_gdpo"

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
LORA_R = 8
LORA_ALPHA = 16
TRL_STEPS = 3
# The verl recipe's run: its own LoRA (rank 16, alpha 16, all-linear), these sizes, a save every step.
VERL_RUN_ID = "20260223_182638_deepscaler_gdpo_lambda0.5"
VERL_STEPS = 2
VERL_LORA_R = VERL_LORA_ALPHA = 16
# Where that run publishes while verl trains (the recipe's PUSH_TO), on a Hub of its own beside the run
# (`verl_watch_hub`): the run is shared by every pytest-xdist worker, and each has its own session Hub.
VERL_PUSH_TO = "hubkit-test/verl-watched"
VERL_RUN_SIZES = {
    "PROMPTS_PER_STEP": "2",
    "ROLLOUTS_PER_PROMPT": "4",
    "MAX_PROMPT_LENGTH": "128",
    "MAX_COMPLETION_LENGTH": "32",
    "SAVE_EVERY": "1",
    "REWARD_WORKERS": "1",
    "LR": "1e-3",  # large enough that 2 steps visibly move a tiny adapter
    "ACCELERATOR": "cpu",
}
# A random model's answers must end at varied lengths for a length reward to differ within a group: sample
# from the 50 likeliest tokens (verl's default is the whole vocabulary), where the tiny tied model's end
# token often is (`build_tiny_qwen3_tied`).
VERL_RANDOM_MODEL_OVERRIDES = ("actor_rollout_ref.rollout.top_k=50",)
# Fixed inputs every step's reference logits are computed on (token ids well inside any Qwen vocabulary).
REFERENCE_IDS_LIST = [[151644, 872, 198, 3838, 374, 220, 17, 488, 220, 18, 30, 151645]]
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
        log_completions=True,  # checkpoints/completions/completions_N.parquet, as the TRL recipe saves them
        num_completions_to_print=1,
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


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], Path]) -> Path:
    """`build(folder)`'s result, built once for the whole test session, however many pytest-xdist workers
    ask: the first builds it in a folder they all share while the others wait, then all read it. (Each
    worker's tiny models are built from the same seed, so a run trained on one worker's is the same run.)"""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:
        return build(tmp_path_factory.mktemp(name))
    from filelock import FileLock

    root = tmp_path_factory.getbasetemp().parent / name  # the session's, above every worker's own
    built = root.with_name(f"{name}.built")
    with FileLock(f"{root}.lock"):
        if not built.is_file():
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir()
            built.write_text(str(build(root).relative_to(root)))
    return root / built.read_text()


@pytest.fixture(scope="session")
def trl_run_dir(tmp_path_factory: pytest.TempPathFactory, tiny_qwen3) -> Path:
    """A real 3-step TRL GRPO run (checkpoint every step) on the tiny Qwen3, manifest naming its Hub id."""

    def train(root: Path) -> Path:
        return make_trl_run(root / "tiny-qwen3-trl-grpo", Path(tiny_qwen3.local_dir), tiny_qwen3.repo_id)

    return built_once(tmp_path_factory, "trl-runs", train)


def verl_available() -> bool:
    """True when verl 0.6.1's own environment is installed (``make venv-verl``)."""
    return VERL_PYTHON.is_file() and (REPO_ROOT / ".venv-verl" / ".installed").is_file()


def verl_watch_hub(run_dir: Path) -> Path:
    """The root of the Hub `verl_run_dir`'s run published to while it trained (open it with LocalHub)."""
    return run_dir.parents[1] / "hub"


def verl_reference_dir(run_dir: Path) -> Path:
    """Where the logits of each step's adapter as verl saved it are kept (``global_step_N.pt``), beside the run."""
    return run_dir.parent / f"{run_dir.name}-reference"


def prepare_verl_data(out_dir: Path) -> Path:
    """The recipe's `prepare_data.py` on the DeepScaleR sample in tests/data, run in verl's environment."""
    command = [
        str(VERL_PYTHON),
        str(VERL_RECIPE / "prepare_data.py"),
        f"--source-file={TEST_DATA / 'deepscaler_mini.jsonl'}",
        f"--difficulty-file={TEST_DATA / 'deepscaler_mini_difficulty.csv'}",
        f"--output-dir={out_dir}",
    ]
    subprocess.run(command, check=True, capture_output=True, timeout=300)
    return out_dir


def run_verl_recipe(
    runs_dir: Path,
    run_id: str,
    model: TinyModel,
    data_dir: Path,
    *,
    ranks: int = 2,
    steps: int = VERL_STEPS,
    env: dict[str, str] | None = None,
    timeout: float = 900,
) -> subprocess.CompletedProcess[str]:
    """The verl recipe's own `launch.sh` through verl 0.6.1's `main_ppo`, on CPU, a checkpoint every step.

    What differs from the seed's GPU command line: the sizes (`VERL_RUN_SIZES`), the CPU mode's overrides
    (`tests.support.verl_cpu`), and two settings for a random model (`VERL_RANDOM_MODEL_OVERRIDES`).

    Args:
        runs_dir: ``RUNS_DIR``; the run lands in ``runs_dir / run_id``.
        run_id: ``RUN_ID``.
        model: the base, a local folder (``MODEL``) published under its Hub id (``BASE_MODEL_ID``).
        data_dir: written by `prepare_verl_data`.
        ranks: FSDP ranks (``N_GPUS_PER_NODE``).
        steps: ``TOTAL_STEPS``.
        env: more environment (``AGGREGATION``, ``PUSH_TO``, ...).
        timeout: seconds before the launch is stopped.

    Returns:
        The finished launch (its return code is the caller's to check).
    """
    environment = {
        **os.environ,
        **verl_cpu.ENVIRONMENT,
        **VERL_RUN_SIZES,
        "PYTHON": str(VERL_PYTHON),
        "MODEL": str(model.local_dir),
        "BASE_MODEL_ID": model.repo_id,
        "DATA_DIR": str(data_dir),
        "RUNS_DIR": str(runs_dir),
        "RUN_ID": run_id,
        "TOTAL_STEPS": str(steps),
        "N_GPUS_PER_NODE": str(ranks),
        **(env or {}),
    }
    runs_dir.mkdir(parents=True, exist_ok=True)
    # The recipe has verl dump every rollout of every step to the run's rollouts/ (read by the tests too).
    overrides = [*verl_cpu.overrides(ranks), *VERL_RANDOM_MODEL_OVERRIDES]
    return subprocess.run(
        ["bash", str(VERL_RECIPE / "launch.sh"), *overrides],
        env=environment,
        cwd=runs_dir.parent,  # Hydra writes its outputs/ folder where verl is started
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def record_verl_reference(run_dir: Path, base_dir: Path) -> None:
    """Each step's logits on fixed inputs with the adapter exactly as verl saved it (``lora_adapter/``)."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    reference_dir = verl_reference_dir(run_dir)
    reference_dir.mkdir(exist_ok=True)
    for step_dir in sorted(run_dir.glob("global_step_*")):
        base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
        model = PeftModel.from_pretrained(base, step_dir / "actor" / "lora_adapter").eval()
        input_ids = torch.tensor(REFERENCE_IDS_LIST)
        with torch.no_grad():
            logits = model(input_ids=input_ids).logits
        torch.save({"input_ids": input_ids, "logits": logits}, reference_dir / f"{step_dir.name}.pt")


@pytest.fixture(scope="session")
def verl_run_dir(tmp_path_factory: pytest.TempPathFactory, tiny_qwen3_tied) -> Path:
    """The verl recipe run by verl itself (2 ranks, 2 steps, a save each step) on the tiny tied Qwen3,
    published while it trained (``PUSH_TO``, `hubkit push --watch`) to `VERL_PUSH_TO` on `verl_watch_hub`.

    Its metrics, checkpoints and manifest are what verl and the recipe wrote; beside it, the logits of each
    step's saved adapter (`verl_reference_dir`). Also the launch's output, as ``launch.log``.
    """
    if not verl_available():
        pytest.skip("verl 0.6.1's environment .venv-verl is missing: run `make venv-verl`")
    from fixtures_hub import TEST_TOKEN
    from huggingface_hub import HfApi

    from hubkit.localhub import LocalHub
    from tests.support.tiny import publish_model

    def train(root: Path) -> Path:
        data_dir = prepare_verl_data(root / "data")
        run_dir = root / "runs" / VERL_RUN_ID
        started = time.monotonic()
        with LocalHub(verl_watch_hub(run_dir), token=TEST_TOKEN) as hub:
            api = HfApi(endpoint=hub.endpoint, token=TEST_TOKEN)
            publish_model(
                api, Path(tiny_qwen3_tied.local_dir), tiny_qwen3_tied.repo_id
            )  # what the merge reads
            watch = {
                "PUSH_TO": VERL_PUSH_TO,
                "PUSH_INTERVAL": "1",
                "HUBKIT": str(Path(sys.executable).with_name("hubkit")),
                "HF_ENDPOINT": hub.endpoint,
                "HF_TOKEN": TEST_TOKEN,
            }
            result = run_verl_recipe(root / "runs", VERL_RUN_ID, tiny_qwen3_tied, data_dir, env=watch)
        if result.returncode != 0:
            raise RuntimeError(f"the verl recipe failed ({result.returncode}):\n{result.stderr[-6000:]}")
        (root / "launch.log").write_text(
            f"wall seconds: {time.monotonic() - started:.1f}\n{result.stdout}\n{result.stderr}"
        )
        record_verl_reference(run_dir, Path(tiny_qwen3_tied.local_dir))
        return run_dir

    return built_once(tmp_path_factory, "verl-runs", train)


@pytest.fixture(scope="session")
def verl_base(tiny_qwen3_tied):
    """A loader of fresh copies of the verl run's base (PEFT wraps the model it is given in place)."""
    import torch
    from transformers import AutoModelForCausalLM

    def load() -> torch.nn.Module:
        return AutoModelForCausalLM.from_pretrained(tiny_qwen3_tied.local_dir, dtype=torch.float32).eval()

    return load


def copy_verl_run(run_dir: Path, dest: Path) -> Path:
    """A copy of a verl run without optimizer/extra state (never read by hubkit), with its reference logits."""
    shutil.copytree(run_dir, dest, ignore=shutil.ignore_patterns("optim_*", "extra_state_*"))
    shutil.copytree(verl_reference_dir(run_dir), verl_reference_dir(dest))
    return dest


def empty_first_adapter(run_dir: Path) -> Path:
    """Replace the first step's ``lora_adapter/`` weights with what verl 0.6.1 + PEFT >= 0.21 writes: no tensors."""
    from safetensors.torch import save_file

    first = min(run_dir.glob("global_step_*"), key=lambda p: int(p.name.rsplit("_", 1)[1]))
    save_file({}, first / "actor" / "lora_adapter" / "adapter_model.safetensors")
    return run_dir


def drop_adapters_for_meta(run_dir: Path) -> Path:
    """Make the run look like verl >= 0.8's: no ``lora_adapter/``, ``lora_train_meta.json`` instead."""
    for actor in run_dir.glob("global_step_*/actor"):
        shutil.rmtree(actor / "lora_adapter")
        (actor / "lora_train_meta.json").write_text(
            json.dumps({"r": VERL_LORA_R, "lora_alpha": VERL_LORA_ALPHA, "task_type": "CAUSAL_LM"})
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
