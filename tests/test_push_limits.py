"""A push within the Hub's limits, through the real client against the local Hub: each refusal named by its
condition in the Hub's words (a 402 for the plan, a 403 for the storage quota, a 429 for a rate), a 429
waited out as the Hub says or ended in one line saying what is left and when to run the push again, a
Space the Hub refuses costing nothing else, and a sweep of mixed base models refused before anything."""

from __future__ import annotations

from pathlib import Path

from helpers import run_cli

from hubkit.runs.manifest import Manifest, SweepInfo
from hubkit.testing.runs import TINY_SHAPES, make_run


def _one_error_line(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), lines
    return lines[0]


# --- a sweep of two base models ---------------------------------------------------------------------------


def test_a_sweep_of_two_base_models_is_refused_by_the_push_before_anything_is_sent(
    tmp_path, tiny_qwen3, tiny_qwen3_tied, local_hub, hub_api, make_repo_id, capsys
):
    runs, repos = tmp_path / "runs", []
    for value, base in ((0.0, tiny_qwen3), (0.5, tiny_qwen3_tied)):
        run_dir = make_run(runs, (1,), base_model=base.repo_id, shapes=TINY_SHAPES, run_id=f"mixed-{value}")
        repos.append(make_repo_id(f"mixed{value}"))
        sweep = SweepInfo("mixed bases", "length_penalty_weight", value)
        Manifest.load(run_dir).with_updates(sweep=sweep, push_to=repos[-1]).save(run_dir)
    start = len(local_hub.request_log)
    argv = ["push", "--sweep", "mixed bases", "--runs-dir", str(runs), "--endpoint", local_hub.endpoint]
    assert run_cli([*argv, "--no-merged", "--no-space", "--no-samples", "-q"]) == 1
    error = _one_error_line(capsys)
    assert "mixed-0.0" in error and "mixed-0.5" in error and "differ in base model" in error
    assert tiny_qwen3.repo_id in error and tiny_qwen3_tied.repo_id in error
    assert local_hub.request_log[start:] == []  # nothing sent, not even a read
    assert not any(hub_api.repo_exists(r) for r in repos)
