"""The release's samples dataset (`<repo>-samples`): every evaluated answer and the completions the trainer
saved, loaded back with `datasets` from the local Hub; an answer holding a secret stops the push, naming its
row, before any repo exists."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
from helpers import push_adapters, push_argv, run_cli
from planted import HF_TOKEN

from hubkit.runs.completions import MAX_ROWS_PER_STEP, read_completions
from hubkit.runs.eval_results import load_eval
from hubkit.runs.manifest import Manifest

HELDOUT = Path(__file__).resolve().parents[1] / "data" / "gsm8k_heldout.jsonl"


def _run_copy(trl_run_dir: Path, dest: Path) -> Path:
    shutil.copytree(
        trl_run_dir, dest, ignore=shutil.ignore_patterns("optimizer.pt", "rng_state.pth", "scheduler.pt")
    )
    Manifest.load(dest).with_updates(run_id=dest.name).save(dest)
    return dest


def test_every_answer_and_the_training_completions_load_back_with_datasets(
    trl_run_dir: Path, tmp_path: Path, local_hub, hub_api, make_repo_id
) -> None:
    from datasets import load_dataset

    run_dir = _run_copy(trl_run_dir, tmp_path / "run")
    argv = ["eval", "--run-dir", str(run_dir), "--problems", str(HELDOUT), "--n", "3", "--steps", "1,3"]
    assert run_cli([*argv, "--metric", "gsm8k_correctness", "--max-new-tokens", "8", "--quiet"]) == 0
    repo = make_repo_id("run")
    assert push_adapters(run_dir, repo, local_hub.endpoint) == 0
    samples_repo = f"{repo}-samples"

    evaluated = load_eval(run_dir).samples
    answers = load_dataset(samples_repo, "eval", split="train")
    assert answers.column_names == [
        "model",
        "step",
        "problem_index",
        "problem",
        "reference",
        "answer",
        "correct",
        "tokens",
        "truncated",
    ]
    key = lambda r: (r["model"], r["problem_index"])  # noqa: E731
    assert sorted(map(key, answers)) == sorted((s.model, s.problem_index) for s in evaluated)
    by_key = {(s.model, s.problem_index): s for s in evaluated}
    assert all(
        row["answer"] == by_key[key(row)].answer and row["correct"] == by_key[key(row)].correct
        for row in answers
    )

    saved = read_completions(run_dir, "trl", "checkpoints").rows
    assert saved and {r.step for r in saved} == {1, 2, 3}
    rollouts = load_dataset(samples_repo, "rollouts", split="train")
    assert len(rollouts) == len(saved) and all(
        n <= MAX_ROWS_PER_STEP for n in pd.Series(rollouts["step"]).value_counts()
    )
    assert sorted(rollouts["completion"]) == sorted(r.completion for r in saved)

    card = Path(hub_api.hf_hub_download(repo, "README.md")).read_text()
    assert f"[{samples_repo}](https://huggingface.co/datasets/{samples_repo})" in card
    dataset_card = Path(hub_api.hf_hub_download(samples_repo, "README.md", repo_type="dataset")).read_text()
    assert f"https://huggingface.co/{repo}" in dataset_card and "| `truncated` | bool |" in dataset_card

    head = hub_api.dataset_info(samples_repo).sha
    assert push_adapters(run_dir, repo, local_hub.endpoint) == 0
    assert hub_api.dataset_info(samples_repo).sha == head  # unchanged: no commit


def test_a_token_in_a_completion_is_refused_naming_its_row_and_nothing_is_published(
    trl_run_dir: Path, tmp_path: Path, local_hub, hub_api, make_repo_id, capsys
) -> None:
    run_dir = _run_copy(trl_run_dir, tmp_path / "run")
    table = run_dir / "checkpoints" / "completions" / "completions_00002.parquet"
    frame = pd.read_parquet(table)
    frame.loc[1, "completion"] = f"my token is {HF_TOKEN}"
    frame.to_parquet(table)
    repo = make_repo_id("planted")
    assert run_cli([*push_argv(run_dir, repo, local_hub.endpoint), "--no-merged", "--no-space", "-q"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and HF_TOKEN not in err
    assert (
        "rollouts/step-000002.parquet row 2: it holds a Hugging Face token" in err and "--no-samples" in err
    )
    assert not hub_api.repo_exists(repo) and not hub_api.repo_exists(f"{repo}-samples", repo_type="dataset")

    assert push_adapters(run_dir, repo, local_hub.endpoint, "--no-samples") == 0
    assert hub_api.repo_exists(repo) and not hub_api.repo_exists(f"{repo}-samples", repo_type="dataset")


def test_a_reward_no_float_can_hold_is_left_out_of_the_row(tmp_path: Path) -> None:
    rollouts = tmp_path / "rollouts"
    rollouts.mkdir()
    row = '{"input": "q", "output": "a", "score": 1.0, "acc": 1%s, "step": 2}\n' % ("0" * 400)
    (rollouts / "2.jsonl").write_text(row)
    (completion,) = read_completions(tmp_path, "verl").rows
    assert (completion.step, completion.prompt, completion.completion) == (2, "q", "a")
    assert completion.rewards == {"score": 1.0}  # the 401-digit integer is not a reward, nor a traceback
