"""The TRL GSM8K recipe: its settings and manifest, the train-split guard, the prompt filter, and a real
3-step `--tiny` run on CPU that `hubkit push` publishes to the local Hub with no flag but the repo id."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from hubkit.errors import HubkitError
from hubkit.runs.manifest import Manifest
from hubkit.runs.problem_hashes import TRAIN_PROBLEM_HASHES_NAME, problem_hash

REPO_ROOT = Path(__file__).resolve().parents[2]
TRAIN_SCRIPT = REPO_ROOT / "recipes" / "trl_gsm8k" / "train.py"
PROBLEMS = Path(__file__).resolve().parents[1] / "data" / "gsm8k_mini.jsonl"
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@pytest.fixture(scope="module")
def recipe() -> ModuleType:
    """train.py as a module (recipes are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location("trl_gsm8k_train", TRAIN_SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is created
    spec.loader.exec_module(module)
    return module


def test_manifest_and_trl_settings_carry_the_seed_table(
    recipe: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from trl import GRPOConfig

    recipe.main(["--dry-run", "--run-id", "20260301_120000_gsm8k_grpo", "--runs-dir", str(tmp_path)])
    report = json.loads(capsys.readouterr().out)
    manifest = Manifest.from_dict(report["manifest"])
    grpo = report["grpo_config"]

    assert manifest.framework == "trl" and manifest.framework_version == "1.16.0"
    assert manifest.base_model == "Qwen/Qwen2.5-3B-Instruct"
    assert (manifest.dataset.id, manifest.dataset.config, manifest.dataset.split) == (
        "openai/gsm8k",
        "main",
        "train",
    )
    assert (manifest.lora.r, manifest.lora.alpha, manifest.lora.target_modules) == (32, 32, LORA_TARGETS)
    assert [c.name for c in manifest.reward.components] == [
        "gsm8k_correctness",
        "gsm8k_strict_format",
        "gsm8k_soft_format",
        "gsm8k_number_only",
    ]
    assert manifest.system_prompt.strip().startswith("Respond in the following format:")
    hp = manifest.hyperparameters
    assert hp["learning_rate"] == 5e-6 and hp["lr_scheduler"] == "cosine" and hp["warmup_ratio"] == 0.1
    assert hp["optimizer"] == "adamw_8bit"
    assert hp["num_generations"] == 8 and hp["prompts_per_step"] == 1 and hp["completions_per_step"] == 8
    assert hp["max_prompt_length"] == 256 and hp["max_completion_length"] == 768
    assert hp["max_steps"] == 1000 and hp["save_steps"] == 20 and hp["seed"] == 3407
    assert hp["quantization"] == "4bit-nf4" and hp["use_vllm"] is True and hp["rollout_engine"] == "vllm"
    assert (hp["adam_beta1"], hp["adam_beta2"], hp["weight_decay"], hp["max_grad_norm"]) == (
        0.9,
        0.99,
        0.001,
        0.1,
    )
    assert hp["kl_coef"] == 0.0 and hp["temperature"] == 1.0
    assert "extra_reward" not in hp and hp["tiny"] is False

    assert (
        grpo["learning_rate"] == 5e-6
        and grpo["lr_scheduler_type"] == "cosine"
        and grpo["warmup_steps"] == 0.1
    )
    assert grpo["optim"] == "adamw_8bit" and grpo["seed"] == 3407 and grpo["max_steps"] == 1000
    assert grpo["per_device_train_batch_size"] == 8 and grpo["num_generations"] == 8
    assert grpo["max_completion_length"] == 768 and grpo["vllm_max_model_length"] == 256 + 768
    assert grpo["use_vllm"] is True and grpo["save_steps"] == 20
    assert grpo["reward_weights"] == [1.0, 1.0, 1.0, 1.0]
    assert grpo["multi_objective_aggregation"] == "sum_then_normalize"
    # TRL 1.16 accepts every option (it removed max_prompt_length and warmup_ratio); bf16 needs a GPU here.
    config = GRPOConfig(**{**grpo, "output_dir": str(tmp_path / "out"), "bf16": False, "use_cpu": True})
    assert config.optim == "adamw_8bit" and config.use_vllm and config.vllm_mode == "colocate"
    assert config.get_warmup_steps(1000) == 100


def test_a_sweep_point_adds_the_length_penalty_and_records_the_sweep(
    recipe: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--dry-run", "--runs-dir", str(tmp_path), "--length-penalty", "0.25", "--sweep", "gsm8k lp"]
    recipe.main(argv)
    report = json.loads(capsys.readouterr().out)
    manifest = Manifest.from_dict(report["manifest"])
    penalty = manifest.reward.components[-1]
    assert (penalty.name, penalty.weight, penalty.params) == (
        "length_penalty",
        0.25,
        {"max_completion_length": 768},
    )
    assert report["grpo_config"]["reward_weights"] == [1.0, 1.0, 1.0, 1.0, 0.25]
    # TRL's own aggregation still computes the spec's advantages: plain GRPOTrainer trains it.
    assert report["grpo_config"]["multi_objective_aggregation"] == "sum_then_normalize"
    assert (manifest.sweep.name, manifest.sweep.setting, manifest.sweep.value) == (
        "gsm8k lp",
        "length_penalty_weight",
        0.25,
    )
    recipe.main(
        ["--dry-run", "--runs-dir", str(tmp_path), "--seed", "7", "--sweep", "s", "--sweep-over", "seed"]
    )
    manifest = Manifest.from_dict(json.loads(capsys.readouterr().out)["manifest"])
    assert (manifest.sweep.setting, manifest.sweep.value, manifest.hyperparameters["seed"]) == ("seed", 7, 7)
    assert [c.name for c in manifest.reward.components][
        -1
    ] == "gsm8k_number_only"  # no penalty without weight


def test_batch_of_one_prompt_splits_over_processes(recipe: ModuleType, tmp_path: Path) -> None:
    config = recipe.RecipeConfig()
    assert recipe.grpo_config_kwargs(config, tmp_path, 4)["per_device_train_batch_size"] == 2
    with pytest.raises(HubkitError, match="8 completions per step do not split over 3 processes"):
        recipe.grpo_config_kwargs(config, tmp_path, 3)


def test_test_split_cannot_be_loaded_during_the_run(recipe: ModuleType, tmp_path: Path) -> None:
    import datasets

    files = {"train": str(PROBLEMS), "test": str(PROBLEMS)}
    with recipe.train_split_only():
        assert len(datasets.load_dataset("json", data_files=files, split="train")) == 13
        for split in ("test", "train+test", None, "test[:10]"):
            with pytest.raises(HubkitError, match="train split only"):
                datasets.load_dataset("json", data_files=files, split=split)
    # The guard ends with the run.
    assert len(datasets.load_dataset("json", data_files=files, split="test")) == 13


def test_prompts_over_256_tokens_are_dropped(recipe: ModuleType, qwen3_tokenizer_dir: Path) -> None:
    import datasets
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(qwen3_tokenizer_dir)
    problems = datasets.load_dataset("json", data_files={"train": str(PROBLEMS)}, split="train")
    prompts = recipe.to_prompts(problems, tokenizer, 256)

    assert len(prompts) == 12, "the one long question is over 256 tokens"
    assert all("farmer keeps careful notes" not in p["prompt"][-1]["content"] for p in prompts)
    first = prompts[0]
    assert first["prompt"][0] == {"role": "system", "content": recipe.SYSTEM_PROMPT}
    assert first["answer"].endswith("#### 27")
    with pytest.raises(HubkitError, match="no prompt fits in 8 tokens"):
        recipe.to_prompts(problems, tokenizer, 8)


def test_training_problem_hashes_are_recorded(
    recipe: ModuleType, qwen3_tokenizer_dir: Path, tmp_path: Path
) -> None:
    import datasets
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(qwen3_tokenizer_dir)
    problems = datasets.load_dataset("json", data_files={"train": str(PROBLEMS)}, split="train")
    path = recipe.record_train_problems(tmp_path, recipe.to_prompts(problems, tokenizer, 256))

    questions = [json.loads(line)["question"] for line in PROBLEMS.read_text().splitlines()]
    trained = [q for q in questions if "farmer keeps careful notes" not in q]  # the one dropped as too long
    assert path == tmp_path / TRAIN_PROBLEM_HASHES_NAME
    assert path.read_text().split() == sorted(problem_hash(q) for q in trained)


def _tiny_run(tiny_qwen3, runs: Path) -> list[str]:
    """The recipe's arguments for a CPU smoke run on the tiny Qwen3 and the mini GSM8K problems."""
    return [
        "--tiny",
        "--model",
        tiny_qwen3.repo_id,
        "--problems-file",
        str(PROBLEMS),
        "--runs-dir",
        str(runs),
    ]


@pytest.mark.slow
def test_tiny_run_trains_three_steps_and_pushes_while_training(
    recipe: ModuleType,
    tmp_path: Path,
    tiny_qwen3,
    hub_api,
    new_repo_id: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import torch
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from hubkit.cli import main as hubkit_main
    from hubkit.runs import load_run

    runs = tmp_path / "runs"
    run_id = "20260301_120000_gsm8k_grpo_tiny"
    recipe.main([*_tiny_run(tiny_qwen3, runs), "--run-id", run_id, "--push-to", new_repo_id])
    run_dir = runs / run_id
    manifest = Manifest.load(run_dir)
    assert manifest.push_to == new_repo_id
    assert manifest.base_model == tiny_qwen3.repo_id
    assert manifest.started_at and manifest.finished_at
    assert manifest.dataset.num_rows == 12 and manifest.dataset.id == "gsm8k_mini.jsonl"
    assert len((run_dir / TRAIN_PROBLEM_HASHES_NAME).read_text().split()) == 12
    assert manifest.dataset.content_sha256 and manifest.hyperparameters["max_steps"] == 3
    assert manifest.hyperparameters["extra_reward"].startswith("tiny_signal_reward")
    assert str(tmp_path) not in (run_dir / "hubkit.json").read_text()

    run = load_run(run_dir)
    assert [c.step for c in run.checkpoints] == [1, 2, 3]
    assert all(c.complete for c in run.checkpoints)
    assert run.finished
    assert {"rewards/gsm8k_correctness/mean", "rewards/tiny_signal_reward/mean"} <= {
        name for row in run.metrics.rows for name in row.values
    }
    first = load_file(run_dir / "checkpoint-1" / "adapter_model.safetensors")
    last = load_file(run_dir / "checkpoint-3" / "adapter_model.safetensors")
    lora_b = [k for k in last if "lora_B" in k]
    assert any(last[k].abs().sum() > 0 for k in lora_b), "the steps trained the adapter"
    assert any(not torch.equal(first[k], last[k]) for k in lora_b)

    # Pushed while training: every checkpoint, the final one at the root, and the merged model.
    files = set(hub_api.list_repo_files(new_repo_id))
    assert {f"checkpoints/global_step_{s}/adapter_model.safetensors" for s in (1, 2, 3)} <= files
    assert {"adapter_model.safetensors", "README.md", "hubkit.json"} <= files
    assert hub_api.file_exists(new_repo_id + "-merged", "model.safetensors")
    commits = hub_api.list_repo_commits(new_repo_id)

    # `hubkit push --run-id RUN` and nothing else finds the recorded repo, which is already complete.
    monkeypatch.setenv("HUBKIT_RUNS_DIR", str(runs))
    capsys.readouterr()
    hubkit_main(["push", "--run-id", run_id])
    out = capsys.readouterr().out
    assert f"Publishing to {new_repo_id}" in out and f"{new_repo_id}: up to date" in out
    assert hub_api.list_repo_commits(new_repo_id) == commits

    base = AutoModelForCausalLM.from_pretrained(tiny_qwen3.local_dir).eval()
    published = PeftModel.from_pretrained(base, new_repo_id, subfolder="checkpoints/global_step_3").eval()
    local = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(tiny_qwen3.local_dir).eval(), run_dir / "checkpoint-3"
    ).eval()
    input_ids = torch.tensor([[1, 5, 9, 42, 7, 3]])
    with torch.no_grad():
        assert torch.equal(published(input_ids).logits, local(input_ids).logits)


# Where the test's command line differs from the seed's GPU one (beside the model, data and step count):
# only what needs CUDA.
CPU_FLAGS = (
    "--cpu",  # transformers refuses bf16 training without a GPU unless told to train on the CPU
    "--no-quantization",  # 4-bit NF4 loading: bitsandbytes needs CUDA (bf16 LoRA instead)
    "--no-vllm",  # vLLM needs a GPU: TRL samples with transformers instead
    *("--optimizer", "adamw_torch"),  # bitsandbytes' 8-bit AdamW needs CUDA
)
CPU_SETTINGS = {
    "use_cpu": True,
    "quantization": "none",
    "use_vllm": False,
    "rollout_engine": "transformers",
    "optimizer": "adamw_torch",
}


@pytest.mark.slow
# It trains the seed configuration and pushes it: beside the other worker's heaviest module (the k-quants)
# its fixtures and training took past the suite's 600 s, and pytest-timeout's thread method then ends the
# whole worker.
@pytest.mark.timeout(1800)
def test_the_seed_configuration_trains_on_cpu_and_push_publishes_it(
    recipe: ModuleType,
    tmp_path: Path,
    demo_base_model,
    hub_api,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from hubkit.cli import main as hubkit_main
    from hubkit.demo import problems
    from hubkit.runs import load_run

    runs, run_id = tmp_path / "runs", "20260301_120000_gsm8k_grpo_seed"
    recipe.main(["--dry-run", "--run-id", run_id, "--runs-dir", str(runs)])
    seed = Manifest.from_dict(json.loads(capsys.readouterr().out)["manifest"]).hyperparameters
    model, data = demo_base_model.repo_id, str(problems.path("train"))
    argv = ["--model", model, "--problems-file", data, "--max-steps", "2", "--runs-dir", str(runs)]
    recipe.main([*argv, "--run-id", run_id, *CPU_FLAGS])

    run_dir = runs / run_id
    manifest = Manifest.load(run_dir)
    assert manifest.hyperparameters == {**seed, "max_steps": 2, **CPU_SETTINGS}
    assert (manifest.lora.r, manifest.lora.alpha) == (32, 32) and manifest.finished_at
    run = load_run(run_dir)
    # The seed saves every 20 steps; TRL saves the last step too.
    assert [c.step for c in run.checkpoints] == [2]
    logged = {name for row in run.metrics.rows for name in row.values}
    components = ("gsm8k_correctness", "gsm8k_strict_format", "gsm8k_soft_format", "gsm8k_number_only")
    assert {f"rewards/{name}/mean" for name in components} <= logged

    monkeypatch.setenv("HUBKIT_RUNS_DIR", str(runs))
    hubkit_main(["push", "--run-id", run_id, "--quiet"])
    repo_id = f"{hub_api.whoami()['name']}/{run_id}"
    input_ids = torch.tensor([[1, 5, 9, 42, 7, 3]])

    def loaded(**where: str) -> torch.Tensor:
        base = AutoModelForCausalLM.from_pretrained(demo_base_model.local_dir).eval()
        with torch.no_grad():
            return PeftModel.from_pretrained(base, **where).eval()(input_ids).logits

    local = loaded(model_id=str(run_dir / "checkpoint-2"))
    assert torch.equal(loaded(model_id=repo_id, subfolder="checkpoints/global_step_2"), local)
    assert torch.equal(loaded(model_id=repo_id, revision="step-2"), local)
    assert hub_api.file_exists(f"{repo_id}-merged", "model.safetensors")


def test_gsm8k_from_the_hub_downloads_the_train_split_only(
    recipe: ModuleType, tmp_path: Path, hub_api, local_hub, make_repo_id
) -> None:
    import pandas as pd

    # A repo laid out as openai/gsm8k: <config>/<split>-*.parquet, configs declared in the card.
    repo = make_repo_id("gsm8k")
    hub_api.create_repo(repo, repo_type="dataset")
    rows = [json.loads(line) for line in PROBLEMS.read_text().splitlines()]
    pd.DataFrame(rows).to_parquet(tmp_path / "train.parquet")
    pd.DataFrame(rows[:3]).to_parquet(tmp_path / "test.parquet")
    card = (
        "---\nconfigs:\n- config_name: main\n  data_files:\n  - split: train\n    path: main/train-*\n"
        "  - split: test\n    path: main/test-*\n---\n"
    )
    hub_api.upload_file(
        path_or_fileobj=card.encode(), path_in_repo="README.md", repo_id=repo, repo_type="dataset"
    )
    for split in ("train", "test"):
        commit = hub_api.upload_file(
            path_or_fileobj=str(tmp_path / f"{split}.parquet"),
            path_in_repo=f"main/{split}-00000-of-00001.parquet",
            repo_id=repo,
            repo_type="dataset",
        ).oid
    start = len(local_hub.request_log)

    config = dataclasses.replace(recipe.RecipeConfig(), dataset_id=repo)
    with recipe.train_split_only():
        problems, revision = recipe.load_problems(config, None)

    assert len(problems) == 13 and revision == commit
    assert problems[0]["answer"].endswith("#### 27")
    requested = [path for _, path, _ in local_hub.request_log[start:]]
    assert any("main/train-00000-of-00001.parquet" in path for path in requested)
    assert not any("test-00000" in path for path in requested), "the test split was downloaded"


def test_a_run_with_checkpoints_is_never_trained_over(
    recipe: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "runs" / "20260301_120000_gsm8k_grpo"
    (run_dir / "checkpoint-20").mkdir(parents=True)
    with pytest.raises(SystemExit) as exited:
        recipe.main(["--runs-dir", str(tmp_path / "runs"), "--run-id", run_dir.name])
    assert "already holds checkpoints: choose a new --run-id" in str(exited.value.code)
    assert list(run_dir.iterdir()) == [run_dir / "checkpoint-20"]


@pytest.mark.slow
def test_a_sweep_trained_with_the_recipe_is_evaluated_in_one_pass_and_published_together(
    recipe: ModuleType, tmp_path: Path, tiny_qwen3, hub_api, local_hub, make_repo_id, capsys
) -> None:
    from helpers import run_cli

    from hubkit.release.companions import SWEEP_PAGE
    from hubkit.runs.eval_results import load_eval

    runs, weights = tmp_path / "runs", (0.0, 0.5, 1.0)
    name = "tiny sweep " + make_repo_id("").rsplit("-", 1)[1]
    tiny = _tiny_run(tiny_qwen3, runs)
    for weight in weights:
        recipe.main(
            [
                *tiny,
                "--run-id",
                f"lp{weight}",
                "--max-steps",
                "2",
                "--length-penalty",
                str(weight),
                "--sweep",
                name,
            ]
        )
    manifests = {w: Manifest.load(runs / f"lp{w}") for w in weights}
    assert [m.sweep.value for m in manifests.values()] == list(weights)
    assert [c.name for c in manifests[0.5].reward.components][-1] == "length_penalty"

    held_out = [
        "--problems",
        str(PROBLEMS.with_name("gsm8k_heldout.jsonl")),
        "--n",
        "4",
        "--max-new-tokens",
        "8",
    ]
    assert run_cli(["eval", "--sweep", name, "--runs-dir", str(runs), *held_out]) == 0
    assert all(load_eval(runs / f"lp{w}").summary.models[0].name == "base" for w in weights)
    repos = {w: make_repo_id(f"lp{w}") for w in weights}
    for weight in weights:
        argv = [
            "push",
            "--run-dir",
            str(runs / f"lp{weight}"),
            "--repo-id",
            repos[weight],
            "--no-merged",
            "--no-space",
        ]
        assert run_cli([*argv, "--endpoint", local_hub.endpoint, "-q"]) == 0

    owner = repos[0.0].split("/")[0]
    (found,) = [c for c in hub_api.list_collections(owner=owner) if c.title == name]
    items = hub_api.get_collection(found.slug).items
    page = SWEEP_PAGE.sweep_repo_id(owner, name)
    assert [i.item_id for i in items] == [page] + [repos[w] + s for w in weights for s in ("", "-samples")]
    assert all(
        i.note.startswith(f"length_penalty_weight={w} · ") for w, i in zip(weights, items[1::2], strict=True)
    )
    assert all("final accuracy" in i.note and "on 4 problems" in i.note for i in items[1:])
    card = Path(hub_api.hf_hub_download(page, "README.md", repo_type="dataset")).read_text()
    assert all(f"| {w} | [{repos[w]}]" in card for w in weights)
    # Each run's card links its siblings' repos, the first pushed too (rewritten by the later pushes).
    for weight in weights:
        card = Path(hub_api.hf_hub_download(repos[weight], "README.md")).read_text()
        linked = {w for w in weights if f"[adapter](https://huggingface.co/{repos[w]})" in card}
        assert linked == set(weights) - {weight}, (weight, linked)
