"""`hubkit eval --sweep`: every run of a sweep evaluated in one pass (the base loaded and answering once,
every run's checkpoints named adapters of it), each run's results written into it and equal to evaluating
that run alone; runs one pass cannot answer alike are refused in one line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import run_cli
from safetensors.torch import load_file, save_file

from hubkit.rewards import gsm8k
from hubkit.rewards.spec import gsm8k_seed
from hubkit.runs.eval_results import load_eval
from hubkit.runs.manifest import Manifest, SweepInfo

HELDOUT = Path(__file__).resolve().parents[1] / "data" / "gsm8k_heldout.jsonl"
COMMON = [
    "--problems",
    str(HELDOUT),
    "--steps",
    "1,3",
    "--n",
    "4",
    "--max-new-tokens",
    "8",
    "--dtype",
    "float32",
]


def _sweep_copy(trl_run_dir: Path, dest: Path, value: float, scale: float) -> Path:
    """A copy of the TRL run as the sweep's `value` point, its step-3 adapter's lora_B scaled by `scale`
    (so that each run answers with adapters of its own)."""
    shutil.copytree(
        trl_run_dir, dest, ignore=shutil.ignore_patterns("optimizer.pt", "rng_state.pth", "scheduler.pt")
    )
    manifest = Manifest.load(dest).with_updates(
        run_id=dest.name,
        reward=gsm8k_seed(),
        system_prompt=gsm8k.SYSTEM_PROMPT,
        sweep=SweepInfo("eval sweep", "length_penalty_weight", value),
    )
    manifest.save(dest)
    weights = dest / "checkpoints" / "checkpoint-3" / "adapter_model.safetensors"
    tensors = load_file(weights)
    save_file({k: v * scale if "lora_B" in k else v for k, v in tensors.items()}, weights)
    return dest


@pytest.mark.slow
def test_a_sweep_is_evaluated_in_one_pass_as_each_run_alone(
    trl_run_dir: Path, tmp_path: Path, capsys
) -> None:
    runs = tmp_path / "runs"
    points = {0.0: 1.0, 0.5: 4.0, 1.0: -3.0}
    dirs = {v: _sweep_copy(trl_run_dir, runs / f"lp{v}", v, scale) for v, scale in points.items()}
    shutil.copytree(trl_run_dir, runs / "not-in-the-sweep", ignore=shutil.ignore_patterns("*.pt", "*.pth"))

    assert run_cli(["eval", "--sweep", "eval sweep", "--runs-dir", str(runs), *COMMON]) == 0
    together = {v: load_eval(d) for v, d in dirs.items()}
    assert load_eval(runs / "not-in-the-sweep") is None
    for value, results in together.items():
        assert [m.name for m in results.summary.models] == ["base", "global_step_1", "global_step_3"]
        assert results.summary.run_id == f"lp{value}"
    # Each run's step 3 answers with its own adapter: the runs differ; the base is the same in each.
    step3 = {v: [s.answer for s in r.samples_of(3)] for v, r in together.items()}
    assert len({tuple(a) for a in step3.values()}) == 3
    assert len({tuple(s.answer for s in r.samples_of(None)) for r in together.values()}) == 1

    # The same answers as evaluating each run alone (float32: no rounding differs between the batches).
    for value, run_dir in dirs.items():
        alone = tmp_path / f"alone{value}"
        shutil.copytree(run_dir, alone)
        shutil.rmtree(alone / "eval")
        assert run_cli(["eval", "--run-dir", str(alone), *COMMON]) == 0
        by_itself = load_eval(alone)
        assert [(s.step, s.answer, s.correct, s.tokens) for s in by_itself.samples] == [
            (s.step, s.answer, s.correct, s.tokens) for s in together[value].samples
        ]


def test_runs_one_pass_cannot_answer_alike_are_refused(trl_run_dir: Path, tmp_path: Path, capsys) -> None:
    runs = tmp_path / "runs"
    _sweep_copy(trl_run_dir, runs / "a", 0.0, 1.0)
    other = _sweep_copy(trl_run_dir, runs / "b", 1.0, 1.0)
    Manifest.load(other).with_updates(system_prompt="Answer briefly.").save(other)
    assert run_cli(["eval", "--sweep", "eval sweep", "--runs-dir", str(runs), *COMMON]) == 1
    err = capsys.readouterr().err
    assert "run b asks its problems otherwise than a" in err and "evaluate them one by one" in err
    assert load_eval(runs / "a") is None
    assert run_cli(["eval", "--sweep", "no such sweep", "--runs-dir", str(runs), *COMMON]) == 1
    assert "no run of the sweep 'no such sweep'" in capsys.readouterr().err
