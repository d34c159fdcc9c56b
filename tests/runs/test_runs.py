"""Reading runs: finding run directories, TRL and verl layouts, completeness, metrics, runs without a manifest."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import save_tiny_peft_adapter

from hubkit.errors import ManifestError, RunNotFoundError, RunNotStartedError
from hubkit.runs import Metrics, MetricsRow, find_run_dir, load_run
from hubkit.runs.manifest import Manifest
from hubkit.runs.verl import read_metrics_jsonl
from tests.support.runs import write_checkpoint

# --- find_run_dir ---------------------------------------------------------------------------------


def test_find_run_dir_by_id_under_runs_dir(tmp_path: Path) -> None:
    (tmp_path / "runs" / "r1").mkdir(parents=True)
    assert find_run_dir("r1", runs_dir=tmp_path / "runs") == (tmp_path / "runs" / "r1").resolve()


def test_find_run_dir_uses_env_then_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "elsewhere" / "r2").mkdir(parents=True)
    monkeypatch.setenv("HUBKIT_RUNS_DIR", str(tmp_path / "elsewhere"))
    assert find_run_dir("r2") == (tmp_path / "elsewhere" / "r2").resolve()
    monkeypatch.delenv("HUBKIT_RUNS_DIR")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "r3").mkdir(parents=True)
    assert find_run_dir("r3") == (tmp_path / "runs" / "r3").resolve()


def test_find_run_dir_direct_path_wins(tmp_path: Path) -> None:
    assert find_run_dir("ignored", run_dir=tmp_path) == tmp_path.resolve()


def test_find_run_dir_missing_says_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(RunNotFoundError, match=r"no run 'nope' in .*runs-here"):
        find_run_dir("nope", runs_dir=tmp_path / "runs-here")
    with pytest.raises(RunNotFoundError, match="does not exist"):
        find_run_dir(run_dir=tmp_path / "missing")
    with pytest.raises(RunNotFoundError, match="--run-id"):
        find_run_dir()
    with pytest.raises(RunNotFoundError, match="plain directory name"):
        find_run_dir("../escape", runs_dir=tmp_path)


# --- metrics --------------------------------------------------------------------------------------


def test_metrics_merge_sort_series_and_jsonl() -> None:
    metrics = Metrics.from_entries([(2, {"loss": 0.5}), (1, {"loss": 1.0}), (2, {"eval_acc": 0.25}), (3, {})])
    assert [row.step for row in metrics.rows] == [1, 2, 3]
    assert metrics.series("loss") == [(1, 1.0), (2, 0.5)]
    assert metrics.series("eval_acc") == [(2, 0.25)]
    assert metrics.names == ("eval_acc", "loss")
    lines = [json.loads(line) for line in metrics.to_jsonl().splitlines()]
    assert lines == [{"step": 1, "loss": 1.0}, {"step": 2, "eval_acc": 0.25, "loss": 0.5}, {"step": 3}]


def test_metrics_jsonl_writes_nan_as_null() -> None:
    metrics = Metrics((MetricsRow(1, {"loss": math.nan}),))
    assert json.loads(metrics.to_jsonl()) == {"step": 1, "loss": None}


def test_verl_metrics_file_partial_last_line_and_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text(
        '{"step": 0, "data": {"val-core/acc": 0.1}}\n'
        '{"step": 1, "data": {"actor/pg_loss": -0.2, "training/epoch": 0, "note": "x", "flag": true}}\n'
        '{"step": 2, "data": {"actor/pg'  # still being written
    )
    metrics = read_metrics_jsonl(path)
    assert [row.step for row in metrics.rows] == [0, 1]
    assert metrics.rows[1].values == {"actor/pg_loss": -0.2, "training/epoch": 0.0}
    path.write_text('{"step": 1, "data": {}}\nnot json\n{"step": 2, "data": {}}\n')
    with pytest.raises(ManifestError, match=r"m\.jsonl line 2: not JSON"):
        read_metrics_jsonl(path)


# --- synthetic layouts (no training) --------------------------------------------------------------


def _trl_checkpoint(root: Path, step: int, state_step: int | None, max_steps: int = 10) -> None:
    """A TRL checkpoint whose trainer_state.json records `state_step` (None: not written yet)."""
    history = [{"loss": 1.0 / s, "step": s} for s in range(1, (state_step or 0) + 1)]
    path = write_checkpoint(
        root,
        step,
        base_model="org/base",
        shapes={"model.layers.0.self_attn.q_proj": (8, 8)},
        state={"global_step": state_step, "max_steps": max_steps, "log_history": history},
        training_state=False,
    )
    (path / "tokenizer_config.json").write_text("{}")
    if state_step is None:
        (path / "trainer_state.json").unlink()


def test_trl_completeness_follows_trainer_state(tmp_path: Path) -> None:
    Manifest(run_id=tmp_path.name, framework="trl", base_model="org/base").save(tmp_path)
    _trl_checkpoint(tmp_path, 1, 1)
    _trl_checkpoint(tmp_path, 2, 2)
    _trl_checkpoint(tmp_path, 3, 2)  # trainer_state.json from an older save: not this step's
    _trl_checkpoint(tmp_path, 4, None)  # still saving
    (tmp_path / "checkpoint-x").mkdir()
    run = load_run(tmp_path)
    assert [c.step for c in run.checkpoints] == [1, 2]
    assert [c.step for c in run.pending] == [3, 4]
    assert run.latest is not None and run.latest.step == 2 and run.latest.name == "global_step_2"
    assert run.metrics.series("loss") == [(1, 1.0), (2, 0.5)]
    assert run.tokenizer_dir(run.checkpoints[0]) == tmp_path / "checkpoint-1"
    assert not run.finished


def test_trl_finished_when_max_steps_reached(tmp_path: Path) -> None:
    Manifest(run_id=tmp_path.name, framework="trl", base_model="org/base").save(tmp_path)
    _trl_checkpoint(tmp_path, 2, 2, max_steps=2)
    assert load_run(tmp_path).finished


def _verl_step(root: Path, step: int, world_size: int = 2, ranks: int = 2) -> Path:
    actor = root / f"global_step_{step}" / "actor"
    (actor / "huggingface").mkdir(parents=True)
    (actor / "huggingface" / "tokenizer_config.json").write_text("{}")
    (actor / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": world_size}))
    for rank in range(ranks):
        (actor / f"model_world_size_{world_size}_rank_{rank}.pt").write_bytes(b"")
    return actor


def test_verl_completeness_follows_latest_iteration_and_shards(tmp_path: Path) -> None:
    Manifest(
        run_id=tmp_path.name,
        framework="verl",
        base_model="org/base",
        checkpoints_dir="ckpt",
        hyperparameters={"max_steps": 6},
    ).save(tmp_path)
    root = tmp_path / "ckpt"
    _verl_step(root, 2)
    _verl_step(root, 3, ranks=1)  # rank 1 has not written its shard
    _verl_step(root, 4)  # saved but not yet recorded in latest_checkpointed_iteration.txt
    (root / "latest_checkpointed_iteration.txt").write_text("3\n")
    run = load_run(tmp_path)
    assert [c.step for c in run.checkpoints] == [2]
    assert [c.step for c in run.pending] == [3, 4]
    assert run.tokenizer_dir() == root / "global_step_2" / "actor" / "huggingface"
    assert run.checkpoints[0].adapter_dir is None  # no lora_adapter/ saved
    assert not run.finished
    (root / "latest_checkpointed_iteration.txt").write_text("6")
    _verl_step(root, 6)
    run = load_run(tmp_path)
    assert [c.step for c in run.checkpoints] == [2, 4, 6]
    assert run.finished


def test_verl_finished_reads_verls_own_step_count_name(tmp_path: Path) -> None:
    Manifest(
        run_id=tmp_path.name,
        framework="verl",
        base_model="org/base",
        hyperparameters={"total_training_steps": 2},
    ).save(tmp_path)
    _verl_step(tmp_path, 2)
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("2")
    assert load_run(tmp_path).finished


def test_verl_without_latest_file_has_no_complete_checkpoint(tmp_path: Path) -> None:
    Manifest(run_id=tmp_path.name, framework="verl", base_model="org/base").save(tmp_path)
    _verl_step(tmp_path, 2)
    run = load_run(tmp_path)
    assert run.checkpoints == () and [c.step for c in run.pending] == [2]


def test_no_manifest_infers_framework_and_needs_a_hub_base(tmp_path: Path) -> None:
    _verl_step(tmp_path, 2)
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("2")
    (tmp_path / "global_step_2" / "actor" / "lora_train_meta.json").write_text(
        json.dumps({"r": 16, "lora_alpha": 32, "task_type": "CAUSAL_LM"})
    )
    with pytest.raises(ManifestError, match="pass --base-model"):
        load_run(tmp_path)
    with pytest.raises(ManifestError, match="must be a Hub id"):
        load_run(tmp_path, base_model="/models/local")
    run = load_run(tmp_path, base_model="Qwen/Qwen3-4B")
    assert run.manifest.framework == "verl" and run.manifest.base_model == "Qwen/Qwen3-4B"
    assert run.manifest.run_id == tmp_path.name
    assert run.manifest.lora is not None and (run.manifest.lora.r, run.manifest.lora.alpha) == (16, 32)
    assert [c.step for c in run.checkpoints] == [2]


def test_a_save_caught_before_its_adapter_config_is_waited_for(tmp_path: Path) -> None:
    """A trainer writes the adapter's weights before its config: a watcher looking in between must wait,
    not ask for --base-model; a finished save without a config still asks for it."""
    _trl_checkpoint(tmp_path / "trl", 1, None)  # trainer_state.json not written yet
    config = tmp_path / "trl" / "checkpoint-1" / "adapter_config.json"
    whole = config.read_text()
    config.unlink()
    with pytest.raises(RunNotStartedError, match=r"no whole adapter_config\.json yet"):
        load_run(tmp_path / "trl")
    config.write_text(whole[: len(whole) // 2])
    with pytest.raises(RunNotStartedError, match="wait for the first save to finish"):
        load_run(tmp_path / "trl")
    config.write_text(whole)
    run = load_run(tmp_path / "trl")
    assert run.manifest.base_model == "org/base" and [c.step for c in run.pending] == [1]

    _verl_step(tmp_path / "verl", 1)  # verl has not written latest_checkpointed_iteration.txt yet
    with pytest.raises(RunNotStartedError):
        load_run(tmp_path / "verl")
    (tmp_path / "verl" / "latest_checkpointed_iteration.txt").write_text("1")
    with pytest.raises(ManifestError, match="pass --base-model") as refused:
        load_run(tmp_path / "verl")
    assert not isinstance(refused.value, RunNotStartedError)


def test_no_manifest_takes_hub_base_from_adapter_config(tmp_path: Path) -> None:
    _trl_checkpoint(tmp_path, 1, 1)
    run = load_run(tmp_path)
    assert run.manifest.framework == "trl" and run.manifest.base_model == "org/base"
    assert run.manifest.lora is not None and run.manifest.lora.target_modules == ("q_proj",)


def test_unrecognized_or_ambiguous_layout_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="cannot tell which run"):
        load_run(tmp_path, base_model="org/base")
    _trl_checkpoint(tmp_path, 1, 1)
    _verl_step(tmp_path, 2)
    with pytest.raises(ManifestError, match="both TRL and verl"):
        load_run(tmp_path, base_model="org/base")


def test_a_single_saved_adapter_is_named_as_such(tmp_path: Path) -> None:
    """`model.save_pretrained("lora_model")` (Unsloth's last notebook cell), pushed as if it were a run."""
    save_tiny_peft_adapter(tmp_path / "lora_model")
    with pytest.raises(
        ManifestError, match=r"^lora_model is a single saved adapter .*checkpoint-N/"
    ) as refused:
        load_run(tmp_path / "lora_model", base_model="org/base")
    assert "wait for the first save" not in str(refused.value)


def test_manifest_framework_must_match_the_layout(tmp_path: Path) -> None:
    Manifest(run_id=tmp_path.name, framework="trl", base_model="org/base").save(tmp_path)
    _verl_step(tmp_path, 2)
    with pytest.raises(ManifestError, match=r"says framework 'trl' but .* holds verl checkpoints"):
        load_run(tmp_path)


def test_neutral_metrics_jsonl_reads_back(tmp_path: Path) -> None:
    metrics = Metrics.from_entries([(1, {"loss": 1.5, "reward": 0.25}), (2, {"loss": 1.0})])
    (tmp_path / "metrics.jsonl").write_text(metrics.to_jsonl())
    assert read_metrics_jsonl(tmp_path / "metrics.jsonl") == metrics


def test_base_model_argument_must_agree_with_manifest(tmp_path: Path) -> None:
    Manifest(run_id=tmp_path.name, framework="trl", base_model="org/base").save(tmp_path)
    assert load_run(tmp_path, base_model="org/base").manifest.base_model == "org/base"
    with pytest.raises(ManifestError, match="conflicts"):
        load_run(tmp_path, base_model="org/other")


# --- real runs ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_trl_run_reads_steps_metrics_and_tokenizer(trl_run_dir: Path, tiny_qwen3) -> None:
    run = load_run(trl_run_dir)
    assert run.framework == "trl" and run.manifest.base_model == tiny_qwen3.repo_id
    assert [c.step for c in run.checkpoints] == [1, 2, 3] and run.pending == ()
    assert run.finished
    grad_norms = run.metrics.series("grad_norm")
    assert [step for step, _ in grad_norms] == [1, 2, 3]
    assert all(value > 0 for _, value in grad_norms)  # the reward gives a learning signal
    assert "rewards/even_token_reward/mean" in run.metrics.names
    tokenizer_dir = run.tokenizer_dir(run.checkpoints[-1])
    assert tokenizer_dir == run.checkpoints[-1].path and (tokenizer_dir / "chat_template.jinja").is_file()


@pytest.mark.slow
def test_trl_run_without_manifest(trl_run_dir: Path, tmp_path: Path, tiny_qwen3) -> None:
    run_dir = tmp_path / "plain-trl"
    shutil.copytree(
        trl_run_dir / "checkpoints", run_dir, ignore=shutil.ignore_patterns("*.pt", "*.pth", "*.bin")
    )
    # TRL recorded the local model directory, not a Hub id: the base model must be given.
    with pytest.raises(ManifestError, match="pass --base-model"):
        load_run(run_dir)
    run = load_run(run_dir, base_model=tiny_qwen3.repo_id)
    assert run.manifest.base_model == tiny_qwen3.repo_id and run.manifest.framework == "trl"
    assert run.manifest.lora is not None and (run.manifest.lora.r, run.manifest.lora.alpha) == (8, 16)
    assert [c.step for c in run.checkpoints] == [1, 2, 3]
    assert len(run.metrics.series("loss")) == 3


@pytest.mark.slow
@pytest.mark.verl
def test_verl_run_reads_steps_and_file_logger_metrics(verl_run_dir: Path, tiny_qwen3_tied) -> None:
    run = load_run(verl_run_dir)
    assert run.framework == "verl" and run.manifest.base_model == tiny_qwen3_tied.repo_id
    assert [c.step for c in run.checkpoints] == [1, 2] and run.pending == ()
    assert run.finished
    assert [step for step, _ in run.metrics.series("actor/grad_norm")] == [1, 2]
    assert all(value > 0 for _, value in run.metrics.series("actor/grad_norm"))
    for checkpoint in run.checkpoints:
        assert checkpoint.adapter_dir == checkpoint.path / "actor" / "lora_adapter"
        assert (run.tokenizer_dir(checkpoint) / "tokenizer_config.json").is_file()


# --- the light core -------------------------------------------------------------------------------


def test_reading_runs_needs_no_heavy_imports(tmp_path: Path) -> None:
    _trl_checkpoint(tmp_path, 1, 1)
    code = (
        "import sys; from pathlib import Path; from hubkit.runs import load_run;"
        f"run = load_run(Path({str(tmp_path)!r})); assert [c.step for c in run.checkpoints] == [1];"
        "heavy = sorted({'torch', 'transformers', 'peft', 'safetensors', 'huggingface_hub'} & set(sys.modules));"
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)


@pytest.mark.slow
@pytest.mark.verl
def test_verl_environment_reads_the_verl_run(verl_run_dir: Path) -> None:
    # hubkit's core is installed (--no-deps) beside verl 0.6.1: a run can be read where it was trained.
    from fixtures_runs import VERL_PYTHON

    code = (
        "from pathlib import Path; from hubkit.runs import load_run;"
        f"run = load_run(Path({str(verl_run_dir)!r}));"
        "print([c.step for c in run.checkpoints], len(run.metrics.rows), run.finished)"
    )
    result = subprocess.run([str(VERL_PYTHON), "-c", code], check=True, capture_output=True, text=True)
    assert result.stdout.strip() == "[1, 2] 2 True"
