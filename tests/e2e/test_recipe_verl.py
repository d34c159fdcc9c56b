"""The verl DeepScaleR recipe: data preparation, the launch settings, the manifest, and verl's own checks.

The `verl`-marked tests run verl 0.6.1's code in its own environment (.venv-verl) through a subprocess:
Hydra composition against verl's `ppo_trainer` config, `validate_config`, the reward manager, and the
dataset (`create_rl_dataset` → `RLHFDataset`) with the tiny model's tokenizer.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pandas as pd
import pytest

from hubkit.errors import HubkitError, ManifestError
from hubkit.runs.manifest import DatasetInfo, Manifest
from hubkit.runs.problem_hashes import TRAIN_PROBLEM_HASHES_NAME, problem_hash

REPO_ROOT = Path(__file__).resolve().parents[2]
RECIPE = REPO_ROOT / "recipes" / "verl_gdpo"
DATA = Path(__file__).resolve().parents[1] / "data"
VERL_PYTHON = REPO_ROOT / ".venv-verl" / "bin" / "python"
SEED_SYSTEM_PROMPT = (
    "Please reason through this problem for yourself, and then when giving your answer ONLY provide your final "
    "answer within \\boxed{} and DO NOT provide any reasoning."
)
# The seed run's settings (the recipe's table), as launch.sh must hand them to verl.
SEED_OVERRIDES = {
    "actor_rollout_ref.model.path": "Qwen/Qwen3-4B",
    "actor_rollout_ref.model.lora_rank": "16",
    "actor_rollout_ref.model.lora_alpha": "16",
    "actor_rollout_ref.model.target_modules": "all-linear",
    "actor_rollout_ref.actor.optim.lr": "5e-5",
    "actor_rollout_ref.actor.optim.lr_scheduler_type": "constant",
    "actor_rollout_ref.actor.optim.optimizer": "AdamW",
    "actor_rollout_ref.actor.optim.weight_decay": "0.1",
    "actor_rollout_ref.actor.optim.betas": "[0.9,0.99]",
    "actor_rollout_ref.actor.grad_clip": "1.0",
    "actor_rollout_ref.actor.optim.clip_grad": "1.0",
    "actor_rollout_ref.actor.use_kl_loss": "False",
    "actor_rollout_ref.actor.kl_loss_coef": "0.0",
    "algorithm.use_kl_in_reward": "False",
    "actor_rollout_ref.rollout.temperature": "1.0",
    "actor_rollout_ref.rollout.top_p": "0.95",
    "data.train_batch_size": "6",
    "actor_rollout_ref.rollout.n": "8",
    "data.max_response_length": "15000",
    "trainer.total_training_steps": "200",
    "trainer.save_freq": "20",
    "actor_rollout_ref.actor.ppo_epochs": "1",
    "actor_rollout_ref.actor.clip_ratio": "0.2",
    "actor_rollout_ref.actor.strategy": "fsdp2",
    "actor_rollout_ref.rollout.name": "vllm",
    "trainer.n_gpus_per_node": "4",
    "trainer.nnodes": "1",
    "actor_rollout_ref.rollout.layered_summon": "False",
    "actor_rollout_ref.rollout.load_format": "safetensors",
    "reward_model.reward_manager": "hubkit",
    "algorithm.adv_estimator": "hubkit",
}

# The config verl composes from SEED_OVERRIDES (its Hydra defaults filled in), as preflight reports it.
SEED_CONFIG = {
    "actor_rollout_ref.model.path": "Qwen/Qwen3-4B",
    "actor_rollout_ref.model.lora_rank": 16,
    "actor_rollout_ref.model.lora_alpha": 16,
    "actor_rollout_ref.model.target_modules": "all-linear",
    "actor_rollout_ref.actor.optim.lr": 5e-5,
    "actor_rollout_ref.actor.optim.lr_scheduler_type": "constant",
    "actor_rollout_ref.actor.optim.optimizer": "AdamW",
    "actor_rollout_ref.actor.optim.weight_decay": 0.1,
    "actor_rollout_ref.actor.optim.betas": [0.9, 0.99],
    "actor_rollout_ref.actor.grad_clip": 1.0,
    "actor_rollout_ref.actor.optim.clip_grad": 1.0,
    "actor_rollout_ref.actor.use_kl_loss": False,
    "algorithm.use_kl_in_reward": False,
    "actor_rollout_ref.rollout.temperature": 1.0,
    "actor_rollout_ref.rollout.top_p": 0.95,
    "data.train_batch_size": 6,
    "actor_rollout_ref.rollout.n": 8,
    "actor_rollout_ref.actor.ppo_mini_batch_size": 6,
    "data.max_response_length": 15000,
    "actor_rollout_ref.rollout.response_length": 15000,
    "trainer.total_training_steps": 200,
    "trainer.save_freq": 20,
    "actor_rollout_ref.actor.ppo_epochs": 1,
    "actor_rollout_ref.actor.clip_ratio": 0.2,
    "actor_rollout_ref.actor.clip_ratio_low": 0.2,
    "actor_rollout_ref.actor.clip_ratio_high": 0.2,
    "actor_rollout_ref.actor.strategy": "fsdp2",
    "actor_rollout_ref.ref.strategy": "fsdp2",
    "actor_rollout_ref.rollout.name": "vllm",
    "actor_rollout_ref.rollout.mode": "sync",
    "actor_rollout_ref.rollout.layered_summon": False,
    "actor_rollout_ref.rollout.load_format": "safetensors",
    "trainer.logger": ["console", "file"],
    "trainer.n_gpus_per_node": 4,
    "trainer.nnodes": 1,
}


def _load(name: str) -> ModuleType:
    """Import a recipe script as a module (the recipe folder is not a package; its scripts import each other)."""
    if str(RECIPE) not in sys.path:
        sys.path.insert(0, str(RECIPE))
    spec = importlib.util.spec_from_file_location(f"verl_gdpo_{name}", RECIPE / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is created
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def prepare_data() -> ModuleType:
    return _load("prepare_data")


@pytest.fixture(scope="module")
def write_manifest() -> ModuleType:
    return _load("write_manifest")


def _prepare(prepare_data: ModuleType, out: Path, *extra: str) -> DatasetInfo:
    args = prepare_data._parse_args(
        [
            "--source-file",
            str(DATA / "deepscaler_mini.jsonl"),
            "--difficulty-file",
            str(DATA / "deepscaler_mini_difficulty.csv"),
            "--output-dir",
            str(out),
            *extra,
        ]
    )
    return prepare_data.prepare(args)


def _launch(
    tmp_path: Path, python: Path, mode: str, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ,
        "PYTHON": str(python),
        "DATA_DIR": str(tmp_path / "data"),
        "RUNS_DIR": str(tmp_path / "runs"),
        "RUN_ID": "20260223_182638_deepscaler_gdpo_lambda0.5",
        **env,
    }
    return subprocess.run(
        ["bash", str(RECIPE / "launch.sh"), *([mode] if mode else []), *args],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _launch_overrides(
    tmp_path: Path, python: Path, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    return _launch(tmp_path, python, "--print-overrides", *args, **env)


def _as_dict(lines: list[str]) -> dict[str, str]:
    return dict(line.split("=", 1) for line in lines)


def _build_manifest(
    write_manifest: ModuleType,
    overrides: list[str],
    *,
    base_model: str = "Qwen/Qwen3-4B",
    aggregation: str = "sum_then_normalize",
) -> Manifest:
    """The manifest of a run called `run` launched with `overrides` (λ 0.5, on a CPU, no verl version)."""
    return write_manifest.build_manifest(
        "run", overrides, DatasetInfo(id="x"), base_model, 0.5, aggregation, "cpu", None
    )


# --- data preparation ------------------------------------------------------------------------------


def test_prepare_data_keeps_the_easy_problems_in_verl_format(
    prepare_data: ModuleType, tmp_path: Path
) -> None:
    info = _prepare(prepare_data, tmp_path)

    rows = pd.read_parquet(tmp_path / "train.parquet")
    # Kept: solved >= 99 % with an answer. Dropped: 42 % and 10.9 % solved, 98.4 % (just below), a problem
    # annotated twice (75 % and 99.2 %: the lower rate counts), one without an annotation, one without an answer.
    assert [r["source_index"] for r in rows["extra_info"]] == [0, 1, 3, 7, 9, 10]
    assert [r["index"] for r in rows["extra_info"]] == list(range(6))
    assert [r["ground_truth"] for r in rows["reward_model"]] == [
        "11",
        "\\frac{3}{4}",
        "25",
        "\\frac{3}{8}",
        "6",
        "12",
    ]
    assert set(rows["data_source"]) == {"deepscaler"}
    assert set(rows["ability"]) == {"math"}
    first = list(rows["prompt"][0])
    assert first[0] == {"role": "system", "content": SEED_SYSTEM_PROMPT}
    assert first[1] == {"role": "user", "content": "What is $3 + 4 \\cdot 2$?"}
    # The problem with padding whitespace still joined with its (stripped) annotation.
    assert list(rows["prompt"][5])[1]["content"].strip() == "What is the least common multiple of 4 and 6?"

    assert info.num_rows == 6
    assert info.id == "agentica-org/DeepScaleR-Preview-Dataset"
    assert info.split == "train"
    assert "solved_percentage >= 99%" in info.filter
    assert "lime-nlp/DeepScaleR_Difficulty" in info.filter
    recorded = json.loads((tmp_path / "dataset_info.json").read_text())
    assert DatasetInfo(**recorded) == info
    assert info.content_sha256 == prepare_data.content_sha256(rows)
    # The hash of every kept problem's text, for `hubkit eval`'s contamination check.
    hashes = (tmp_path / TRAIN_PROBLEM_HASHES_NAME).read_text().split()
    assert hashes == sorted(problem_hash(list(prompt)[1]["content"]) for prompt in rows["prompt"])
    assert len(hashes) == 6 and problem_hash("  what is $3 + 4 \\cdot 2$?\n") in hashes


def test_content_hash_follows_the_content(prepare_data: ModuleType, tmp_path: Path) -> None:
    first = _prepare(prepare_data, tmp_path / "a")
    again = _prepare(prepare_data, tmp_path / "b")
    looser = _prepare(prepare_data, tmp_path / "c", "--min-solve-rate", "98")

    assert first.content_sha256 == again.content_sha256
    assert looser.num_rows == 7
    assert looser.content_sha256 != first.content_sha256


def test_solve_rate_column_in_the_source_needs_no_companion(prepare_data: ModuleType, tmp_path: Path) -> None:
    source = pd.DataFrame(
        {"problem": ["One plus one?", "Two plus two?"], "answer": ["2", "4"], "pass_rate": [100.0, 50.0]}
    )
    source.to_parquet(tmp_path / "src.parquet")
    args = prepare_data._parse_args(
        [
            "--source-file",
            str(tmp_path / "src.parquet"),
            "--difficulty-source",
            "none",
            "--solve-rate-column",
            "pass_rate",
            "--output-dir",
            str(tmp_path / "out"),
        ]
    )
    info = prepare_data.prepare(args)
    assert info.num_rows == 1
    assert "from the problems" in info.filter


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--expect-rows", "1840"], "kept 6 rows, expected 1840"),
        (["--solve-rate-column", "pass_at_1"], "no column(s) ['pass_at_1']"),
        (["--min-solve-rate", "101"], "no problem has solved_percentage >= 101"),
    ],
)
def test_prepare_data_refusals(
    prepare_data: ModuleType, tmp_path: Path, extra: list[str], message: str
) -> None:
    with pytest.raises(HubkitError) as excinfo:
        _prepare(prepare_data, tmp_path, *extra)
    assert message in str(excinfo.value)
    assert not (tmp_path / "train.parquet").exists()


# --- launch settings and manifest --------------------------------------------------------------------


def test_launch_prints_every_seed_setting(tmp_path: Path) -> None:
    result = _launch_overrides(tmp_path, Path(sys.executable))
    assert result.returncode == 0, result.stderr
    overrides = _as_dict(result.stdout.splitlines())

    for key, value in SEED_OVERRIDES.items():
        assert overrides.get(key) == value, key
    run_dir = tmp_path / "runs" / "20260223_182638_deepscaler_gdpo_lambda0.5"
    assert overrides["trainer.default_local_dir"] == str(run_dir)
    assert overrides["custom_reward_function.path"].endswith("hubkit/integrations/verl_reward.py")
    # The reward manager reads the reward spec from the manifest; the file logger path reaches the Ray actor.
    assert overrides["+reward_model.reward_kwargs.spec_file"] == str(run_dir / "hubkit.json")
    assert overrides["+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH"] == str(
        run_dir / "metrics.jsonl"
    )
    # vLLM 0.6.1 refuses chunked prefill below prompt + response length.
    assert int(overrides["actor_rollout_ref.rollout.max_num_batched_tokens"]) >= 1024 + 15000
    assert not run_dir.exists(), "printing the overrides must not create the run"


def test_launch_settings_follow_the_environment(tmp_path: Path) -> None:
    result = _launch_overrides(
        tmp_path,
        Path(sys.executable),
        "trainer.val_before_train=True",
        RUN_ID="",
        LAMBDA="0.2",
        NNODES="2",
        KL_COEF="0.01",
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    overrides = _as_dict(lines)
    assert overrides["trainer.experiment_name"].endswith("_deepscaler_gdpo_lambda0.2")
    assert overrides["trainer.nnodes"] == "2"
    assert overrides["actor_rollout_ref.actor.use_kl_loss"] == "True"
    assert lines[-1] == "trainer.val_before_train=True", "extra overrides come last, so they win"


def test_launch_refuses_an_unknown_aggregation(tmp_path: Path) -> None:
    result = _launch_overrides(tmp_path, Path(sys.executable), AGGREGATION="mean")
    assert result.returncode == 1
    assert "AGGREGATION must be sum_then_normalize or normalize_then_sum" in result.stderr


def test_launch_refuses_to_train_into_a_trained_run(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "20260223_182638_deepscaler_gdpo_lambda0.5"
    run_dir.mkdir(parents=True)
    (run_dir / "latest_checkpointed_iteration.txt").write_text("40")
    (run_dir / "metrics.jsonl").write_text('{"step": 1, "data": {}}\n')

    result = _launch(tmp_path, Path(sys.executable), "")
    assert result.returncode == 1
    assert "already holds checkpoints: choose a new RUN_ID" in result.stderr
    assert (run_dir / "metrics.jsonl").read_text() == '{"step": 1, "data": {}}\n'
    assert not (run_dir / "hubkit.json").exists()


def test_manifest_records_every_seed_setting(write_manifest: ModuleType, tmp_path: Path) -> None:
    overrides = _launch_overrides(tmp_path, Path(sys.executable)).stdout.splitlines()
    dataset = DatasetInfo(id="agentica-org/DeepScaleR-Preview-Dataset", num_rows=1840, content_sha256="ab")
    manifest = write_manifest.build_manifest(
        run_id="20260223_182638_deepscaler_gdpo_lambda0.5",
        overrides=overrides,
        dataset=dataset,
        base_model="Qwen/Qwen3-4B",
        lam=0.5,
        aggregation="sum_then_normalize",
        accelerator="NVIDIA H100 80GB HBM3",
        framework_version="0.6.1",
    )
    manifest.save(tmp_path)
    loaded = Manifest.load(tmp_path)

    assert loaded.framework == "verl" and loaded.framework_version == "0.6.1"
    assert loaded.base_model == "Qwen/Qwen3-4B"
    assert loaded.dataset == dataset
    assert loaded.system_prompt == SEED_SYSTEM_PROMPT
    assert loaded.metrics_file == "metrics.jsonl" and loaded.checkpoints_dir == "."
    assert loaded.started_at and loaded.finished_at is None
    assert loaded.hardware.count == 4 and loaded.hardware.nodes == 1
    assert loaded.hardware.accelerator == "NVIDIA H100 80GB HBM3"
    assert (loaded.lora.r, loaded.lora.alpha) == (16, 16)
    assert loaded.lora.target_modules == ("all-linear",)  # in Qwen3, the seed's seven projections
    reward = loaded.reward
    assert reward.aggregation == "sum_then_normalize"
    assert [(c.name, c.weight) for c in reward.components] == [
        ("math_correctness", 1.0),
        ("length_penalty", 0.5),
    ]
    assert reward.components[1].params["max_completion_length"] == 15000
    assert loaded.hyperparameters == {
        "learning_rate": 5e-5,
        "lr_scheduler": "constant",
        "warmup_steps": 0,
        "optimizer": "AdamW",
        "weight_decay": 0.1,
        "adam_betas": [0.9, 0.99],
        "max_grad_norm": 1.0,
        "kl_coef": 0.0,
        "use_kl_loss": False,
        "ppo_epochs": 1,
        "clip_ratio": 0.2,
        "loss_agg_mode": "token-mean",
        "temperature": 1.0,
        "top_p": 0.95,
        "prompts_per_step": 6,
        "rollouts_per_prompt": 8,
        "completions_per_step": 48,
        "max_prompt_length": 1024,
        "max_completion_length": 15000,
        "max_steps": 200,
        "save_steps": 20,
        "advantage_estimator": "hubkit",
        "training_engine": "fsdp2",
        "rollout_engine": "vllm",
        "gpus_per_node": 4,
        "nodes": 1,
    }
    assert str(tmp_path) not in (tmp_path / "hubkit.json").read_text(), "no local path in the manifest"


def test_manifest_start_copies_the_training_problem_hashes_into_the_run(
    prepare_data: ModuleType, write_manifest: ModuleType, tmp_path: Path
) -> None:
    _prepare(prepare_data, tmp_path / "data")
    overrides = _launch_overrides(tmp_path, Path(sys.executable)).stdout.splitlines()
    run_dir = tmp_path / "runs" / "run"
    dataset_info = str(tmp_path / "data" / "dataset_info.json")
    write_manifest.main(
        [
            *("start", "--run-dir", str(run_dir), "--dataset-info", dataset_info, "--accelerator", "cpu"),
            *("--base-model", "Qwen/Qwen3-4B", "--lambda", "0.5", "--aggregation", "sum_then_normalize"),
            *("--sweep", "deepscaler lp", "--", *overrides),
        ]
    )
    sweep = Manifest.load(run_dir).sweep
    assert (sweep.name, sweep.setting, sweep.value) == ("deepscaler lp", "length_penalty_weight", 0.5)
    recorded = (run_dir / TRAIN_PROBLEM_HASHES_NAME).read_text()
    assert recorded == (tmp_path / "data" / TRAIN_PROBLEM_HASHES_NAME).read_text()
    assert len(recorded.split()) == 6


def test_sweep_launches_one_run_per_weight_each_naming_the_sweep(tmp_path: Path) -> None:
    environment = {
        **os.environ,
        "PYTHON": sys.executable,
        "DATA_DIR": str(tmp_path / "data"),
        "RUNS_DIR": str(tmp_path / "runs"),
        "LAMBDAS": "0 0.5",
        "SWEEP": "lp-sweep",
    }
    done = subprocess.run(
        ["bash", str(RECIPE / "sweep.sh"), "--print-overrides"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    names = [
        line.split("=", 1)[1]
        for line in done.stdout.splitlines()
        if line.startswith("trainer.experiment_name=")
    ]
    assert [name.rsplit("_", 1)[1] for name in names] == ["lambda0", "lambda0.5"]
    assert all("_lp-sweep_" in name for name in names)
    assert f'hubkit push --sweep "lp-sweep" --runs-dir "{tmp_path / "runs"}"' in done.stderr


def test_manifest_can_select_gdpo(write_manifest: ModuleType, tmp_path: Path) -> None:
    overrides = _launch_overrides(tmp_path, Path(sys.executable), AGGREGATION="normalize_then_sum").stdout
    manifest = _build_manifest(write_manifest, overrides.splitlines(), aggregation="normalize_then_sum")
    assert manifest.reward.aggregation == "normalize_then_sum"
    assert manifest.reward.batch_whiten is True


def test_manifest_refuses_a_local_base_model_and_missing_settings(
    write_manifest: ModuleType, tmp_path: Path
) -> None:
    overrides = _launch_overrides(tmp_path, Path(sys.executable)).stdout.splitlines()
    with pytest.raises(ManifestError, match="Hub id"):
        _build_manifest(write_manifest, overrides, base_model="/models/qwen3")
    without_lr = [o for o in overrides if not o.startswith("actor_rollout_ref.actor.optim.lr=")]
    with pytest.raises(ManifestError, match=r"actor_rollout_ref\.actor\.optim\.lr"):
        _build_manifest(write_manifest, without_lr)


# --- verl 0.6.1's own checks, in its environment -----------------------------------------------------

needs_verl = pytest.mark.skipif(
    not VERL_PYTHON.exists(), reason=".venv-verl is missing: run `make venv-verl`"
)


@pytest.mark.verl
@pytest.mark.slow
@needs_verl
def test_preflight_in_verl_composes_the_launch_and_loads_the_data(
    prepare_data: ModuleType, tmp_path: Path, qwen3_tokenizer_dir: Path
) -> None:
    _prepare(prepare_data, tmp_path / "data")
    # The tiny models' tokenizer: the real Qwen3 files. (The copy saved beside a tiny model is in
    # transformers 5's format, whose list-valued `extra_special_tokens` transformers 4.57 cannot read.)
    result = _launch(
        tmp_path,
        VERL_PYTHON,
        "--preflight",
        LAMBDA="0.25",
        AGGREGATION="normalize_then_sum",
        TOKENIZER=str(qwen3_tokenizer_dir),
        ACCELERATOR="NVIDIA H200",
        REWARD_WORKERS="1",
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Preflight passed" in result.stderr
    # verl prints its own progress first; the report is the JSON object printed last.
    lines = result.stdout.splitlines()
    report = json.loads("\n".join(lines[len(lines) - 1 - lines[::-1].index("{") :]))
    config = report["config"]

    # The launch wrote the manifest first, in verl's environment; the reward manager read its spec there.
    run_dir = tmp_path / "runs" / "20260223_182638_deepscaler_gdpo_lambda0.5"
    manifest = Manifest.load(run_dir)
    assert manifest.framework_version == "0.6.1"
    assert manifest.hardware.accelerator == "NVIDIA H200"
    assert manifest.dataset.num_rows == 6
    assert manifest.reward.weights["length_penalty"] == 0.25
    assert manifest.reward.aggregation == "normalize_then_sum" and manifest.reward.batch_whiten
    assert manifest.finished_at is None
    assert report["reward_manager"] == "HubkitRewardManager"
    assert report["adv_estimator"] == "hubkit_advantage"
    assert report["total_training_steps"] == 200
    assert report["train_batches_per_epoch"] == 1  # 6 problems, 6 prompts per step
    assert config["reward_model.reward_kwargs"]["spec_file"] == str(run_dir / "hubkit.json")

    for key, expected in SEED_CONFIG.items():
        # `is` for flags: 0 == False would hide an integer where verl wants a boolean.
        assert config[key] is expected if isinstance(expected, bool) else config[key] == expected, key
    assert config["trainer.default_local_dir"] == str(run_dir)
    env_vars = config["ray_kwargs.ray_init.runtime_env"]["env_vars"]
    assert env_vars["VERL_FILE_LOGGER_PATH"] == str(run_dir / "metrics.jsonl")

    dataset = report["dataset"]
    assert dataset["rows"] == 6
    assert dataset["first_ground_truth"] == "11"
    assert SEED_SYSTEM_PROMPT in dataset["first_prompt_text"]
    assert "What is $3 + 4 \\cdot 2$?" in dataset["first_prompt_text"]

    finish = subprocess.run(
        [str(VERL_PYTHON), str(RECIPE / "write_manifest.py"), "finish", "--run-dir", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert finish.returncode == 0, finish.stderr
    finished = Manifest.load(run_dir)
    assert finished.finished_at is not None
    assert finished.with_updates(finished_at=None) == manifest


@pytest.mark.verl
@needs_verl
def test_preflight_reports_an_unknown_key() -> None:
    result = subprocess.run(
        [
            str(VERL_PYTHON),
            str(RECIPE / "preflight.py"),
            "--",
            "actor_rollout_ref.actor.optim.learning_rate=5e-5",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert "Hydra refused the overrides" in result.stderr
    assert "learning_rate" in result.stderr


def test_prepare_data_downloads_both_datasets_and_records_their_revisions(
    prepare_data: ModuleType, tmp_path: Path, hub_api, make_repo_id
) -> None:
    problems_repo, difficulty_repo = make_repo_id("deepscaler"), make_repo_id("difficulty")
    # The Hub's deepscaler.json is one JSON array.
    rows = [json.loads(line) for line in (DATA / "deepscaler_mini.jsonl").read_text().splitlines()]
    for repo in (problems_repo, difficulty_repo):
        hub_api.create_repo(repo, repo_type="dataset")
    problems_commit = hub_api.upload_file(
        path_or_fileobj=json.dumps(rows).encode(),
        path_in_repo="deepscaler.json",
        repo_id=problems_repo,
        repo_type="dataset",
    ).oid
    difficulty_commit = hub_api.upload_file(
        path_or_fileobj=str(DATA / "deepscaler_mini_difficulty.csv"),
        path_in_repo="Qwen2.5-Math-7B--deepscaler--difficulty.csv",
        repo_id=difficulty_repo,
        repo_type="dataset",
    ).oid

    args = prepare_data._parse_args(
        ["--dataset-id", problems_repo, "--difficulty-source", difficulty_repo, "--output-dir", str(tmp_path)]
    )
    info = prepare_data.prepare(args)

    assert info.id == problems_repo
    assert info.revision == problems_commit
    assert f"{difficulty_repo}@{difficulty_commit}" in info.filter
    assert info.num_rows == 6
    local = _prepare(prepare_data, tmp_path / "local")
    assert info.content_sha256 == local.content_sha256


def test_override_values_parse_as_hydra_reads_them(write_manifest: ModuleType) -> None:
    parsed = write_manifest.parse_overrides(
        ["a=5e-5", "+b=[0.9,0.99]", "c=False", "d=null", "e=16", "f=[q_proj, k_proj]", "g=constant", "a=1e-4"]
    )
    assert parsed == {
        "a": 1e-4,
        "b": [0.9, 0.99],
        "c": False,
        "d": None,
        "e": 16,
        "f": ["q_proj", "k_proj"],
        "g": "constant",
    }
    with pytest.raises(ManifestError, match="not a Hydra override"):
        write_manifest.parse_overrides(["trainer.nnodes"])


def test_manifest_refuses_a_non_integer_batch(write_manifest: ModuleType, tmp_path: Path) -> None:
    overrides = _launch_overrides(tmp_path, Path(sys.executable), "data.train_batch_size=six").stdout
    with pytest.raises(ManifestError, match=r"data\.train_batch_size must be an integer, got 'six'"):
        _build_manifest(write_manifest, overrides.splitlines())


# --- the push watcher beside verl (verl itself runs in test_recipe_verl_run.py) ----------------------


def test_launch_stops_the_push_watcher_when_training_fails(
    prepare_data: ModuleType, tmp_path: Path, new_repo_id: str
) -> None:
    _prepare(prepare_data, tmp_path / "data")
    failing = tmp_path / "python"
    failing.write_text(
        "#!/usr/bin/env bash\n"
        'if [[ "$1" == "-m" && "$2" == "verl.trainer.main_ppo" ]]; then sleep 1; exit 3; fi\n'
        f'exec "{sys.executable}" "$@"\n'
    )
    failing.chmod(0o755)
    watcher_log = tmp_path / "watcher.log"
    fake_hubkit = tmp_path / "hubkit"  # records that it started and how it was stopped
    fake_hubkit.write_text(
        "#!/usr/bin/env bash\n"
        f'echo "started $*" >> "{watcher_log}"\n'
        f"trap 'echo stopped >> \"{watcher_log}\"; exit 143' TERM\n"
        "while true; do sleep 0.1; done\n"
    )
    fake_hubkit.chmod(0o755)
    result = _launch(tmp_path, failing, "", PUSH_TO=new_repo_id, HUBKIT=str(fake_hubkit))
    assert result.returncode == 3
    assert "training failed (exit 3)" in result.stderr
    log = watcher_log.read_text().splitlines()
    assert log[0].startswith("started push --run-dir") and "--watch" in log[0]
    assert log[-1] == "stopped"
