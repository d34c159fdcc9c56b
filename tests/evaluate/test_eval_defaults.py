"""What `hubkit eval` takes from the run when not told: the answer length the run trained with (the manifest,
else a plain TRL run's training_args.bin, read without running it), the dtype the base loads in, and texts
that say what the run had (whose metric, whether a system prompt, no best checkpoint at 0 %)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from eval_results import eval_summary
from helpers import run_cli

from hubkit.errors import EvalError
from hubkit.evaluate.generation import DTYPES, GenerationJob, GenerationSettings
from hubkit.runs import load_run
from hubkit.runs.answer_length import answer_length
from hubkit.runs.eval_results import Sample, load_eval
from hubkit.runs.manifest import MANIFEST_NAME, Manifest

HELDOUT = Path(__file__).resolve().parents[1] / "data" / "gsm8k_heldout.jsonl"


def _plain_trl_run(trl_run_dir: Path, dest: Path) -> Path:
    """The tiny TRL run as a plain TRL script leaves it: TRL's output_dir (checkpoint-N/), no hubkit.json."""
    shutil.copytree(
        trl_run_dir / "checkpoints",
        dest,
        ignore=shutil.ignore_patterns("optimizer.pt", "rng_state.pth", "scheduler.pt"),
    )
    assert not (dest / MANIFEST_NAME).exists()
    return dest


class _RunsACommand:
    """Pickles as a call of os.system: what a hostile training_args.bin holds."""

    def __init__(self, sentinel: Path) -> None:
        self.sentinel = sentinel

    def __reduce__(self):
        return (os.system, (f"touch {self.sentinel}",))


def test_a_plain_trl_run_is_evaluated_with_the_length_it_trained_with(
    trl_run_dir: Path, tiny_qwen3, tmp_path: Path, capsys
) -> None:
    run_dir = _plain_trl_run(trl_run_dir, tmp_path / "plain-trl")
    argv = ["eval", "--run-dir", str(run_dir), "--base-model", tiny_qwen3.repo_id, "--steps", "3"]
    argv += ["--metric", "gsm8k_correctness", "--problems", str(HELDOUT), "--n", "2", "--dtype", "float32"]
    assert run_cli(argv) == 0
    out = capsys.readouterr().out
    assert "up to 12 tokens (the run's max_completion_length (from checkpoint-3/training_args.bin))" in out
    assert "metric gsm8k_correctness (chosen with --metric), no system prompt" in out
    assert "transformers in float32" in out
    results = load_eval(run_dir)
    assert results is not None
    summary = results.summary
    assert (summary.generation.max_new_tokens, summary.generation.dtype) == (12, "float32")
    assert summary.generation.system_prompt is None
    assert (
        summary.generation.prompt_description()
        == "the run's chat template, no system prompt (the run records none)"
    )
    assert (
        "the run's" not in summary.metric.description
        and "(hubkit's GSM8K correctness reward, chosen with --metric)" in summary.metric.description
    )
    # A random tiny model answers no GSM8K problem: then there is no best checkpoint to name.
    best = summary.best()
    assert ("Best checkpoint" in out) == (best is not None)
    if best is None:
        assert "No checkpoint answered any problem correctly: no best checkpoint" in out

    # A hostile training_args.bin is refused in one line, unread (`hubkit.formats.training_args`).
    sentinel = tmp_path / "ran"
    torch.save(_RunsACommand(sentinel), run_dir / "checkpoint-3" / "training_args.bin")
    assert run_cli([*argv, "--quiet"]) == 1
    assert "which is not a transformers, TRL or accelerate class" in capsys.readouterr().err
    assert not sentinel.exists()
    # Without it, the default is said as such.
    (run_dir / "checkpoint-3" / "training_args.bin").unlink()
    for state in run_dir.glob("checkpoint-*/trainer_state.json"):
        state.unlink()
    (run_dir / "checkpoint-3" / "trainer_state.json").write_text('{"global_step": 3, "log_history": []}')
    length = answer_length(load_run(run_dir, base_model=tiny_qwen3.repo_id), None)
    assert not length.recorded
    assert (
        length.source == "hubkit's default: the run records no max_completion_length or max_response_length"
    )


def test_the_answer_length_comes_from_the_manifest_first(trl_run_dir: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(trl_run_dir, run_dir, ignore=shutil.ignore_patterns("optimizer.pt"))
    manifest = Manifest.load(run_dir)
    assert answer_length(load_run(run_dir), None).source == "the run's max_completion_length"
    assert answer_length(load_run(run_dir), 5).tokens == 5
    # verl's name for it; then none in hyperparameters the manifest records: the default, said as such (the
    # trainer's own files are read for runs whose hyperparameters hubkit.json does not record).
    hyperparameters = {k: v for k, v in manifest.hyperparameters.items() if k != "max_completion_length"}
    manifest.with_updates(hyperparameters={**hyperparameters, "max_response_length": 300}).save(run_dir)
    assert answer_length(load_run(run_dir), None).tokens == 300
    manifest.with_updates(hyperparameters=hyperparameters).save(run_dir)
    assert not answer_length(load_run(run_dir), None).recorded


def _sample(step: int | None, index: int, correct: bool) -> Sample:
    name = "base" if step is None else f"global_step_{step}"
    return Sample(name, step, index, f"problem {index}", "1", "answer", correct, 10, False)


def test_no_checkpoint_is_best_when_none_answered_right() -> None:
    all_wrong = [_sample(step, i, step is None and i == 0) for step in (None, 10, 20) for i in range(2)]
    assert eval_summary("run", all_wrong).best() is None  # the base's one right answer does not count
    one_right = [*all_wrong[:-1], _sample(20, 1, True)]
    assert eval_summary("run", one_right).best().name == "global_step_20"


def test_the_base_loads_in_bfloat16_unless_told_otherwise(tiny_qwen3) -> None:
    from hubkit.cli.eval import eval_command
    from hubkit.evaluate import backend_transformers

    base_dir = Path(tiny_qwen3.local_dir)
    assert json.loads((base_dir / "config.json").read_text())["dtype"] == "float32"
    for dtype, expected in (
        ("bfloat16", torch.bfloat16),
        ("float32", torch.float32),
        ("auto", torch.float32),
    ):
        model = backend_transformers.load_model(base_dir, {}, device="cpu", dtype=dtype)
        assert next(model.parameters()).dtype == expected, dtype
    option = next(p for p in eval_command.params if p.name == "dtype")
    assert tuple(option.type.choices) == DTYPES and option.default == "bfloat16"
    with pytest.raises(EvalError, match="--dtype must be one of bfloat16, float16, float32, auto"):
        GenerationJob(base_dir, ("base",), (), ((1,),), GenerationSettings(4), (2,), 0, dtype="int8")  # type: ignore[arg-type]
