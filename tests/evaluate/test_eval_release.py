"""`hubkit eval --repo-id`: a pushed release evaluated from the Hub gives what its run directory gives, and
`--push` commits the results with the card a push of the run would write (against the local Hub, with the
real client, the real tiny TRL run and the real tokenizer)."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import push_argv, run_cli

from hubkit.errors import PublishError
from hubkit.evaluate.release import open_release
from hubkit.hub.auth import hub_client
from hubkit.hub.remote import read_remote
from hubkit.publish.release_eval import linked_repos, push_release_eval
from hubkit.rewards import gsm8k
from hubkit.rewards.spec import gsm8k_seed
from hubkit.runs.eval_results import load_eval
from hubkit.runs.manifest import Manifest
from hubkit.runs.problem_hashes import write_train_problem_hashes

DATA = Path(__file__).resolve().parents[1] / "data"
HELDOUT = DATA / "gsm8k_heldout.jsonl"
TRAIN = DATA / "gsm8k_mini.jsonl"


def _gsm8k_run(trl_run_dir: Path, dest: Path) -> Path:
    """A copy of the tiny TRL run as a GSM8K run: the seed's reward and system prompt, training hashes."""
    import json

    shutil.copytree(
        trl_run_dir, dest, ignore=shutil.ignore_patterns("optimizer.pt", "rng_state.pth", "scheduler.pt")
    )
    manifest = Manifest.load(dest).with_updates(
        run_id=dest.name, reward=gsm8k_seed(), system_prompt=gsm8k.SYSTEM_PROMPT
    )
    manifest.save(dest)
    questions = [json.loads(line)["question"] for line in TRAIN.read_text().splitlines() if line.strip()]
    write_train_problem_hashes(dest, questions)
    return dest


@pytest.mark.slow
def test_a_release_evaluates_as_its_run_directory_and_pushes_the_card_a_push_writes(
    trl_run_dir: Path, local_hub, hub_api, new_repo_id: str, tmp_path: Path, capsys
) -> None:
    run_dir = _gsm8k_run(trl_run_dir, tmp_path / "gsm8k-run")
    # The merged repo under a name of its own, and GGUF files: the card written again keeps both links.
    merged_repo_id, gguf_repo_id = f"{new_repo_id}-full", f"{new_repo_id}-GGUF"
    push = [*push_argv(run_dir, new_repo_id, local_hub.endpoint), "--quiet", "--no-space"]
    push += ["--merged-repo-id", merged_repo_id, "--gguf", "q8_0"]
    assert run_cli(push) == 0  # the adapter repo, its merged model and its GGUF file
    common = ["--problems", str(HELDOUT), "--n", "4", "--steps", "1,3", "--endpoint", local_hub.endpoint]

    assert run_cli(["eval", "--run-dir", str(run_dir), *common, "--quiet"]) == 0
    from_run = load_eval(run_dir)
    out = tmp_path / "release-eval"
    commits = len(hub_api.list_repo_commits(new_repo_id))
    assert run_cli(["eval", "--repo-id", new_repo_id, *common, "--out", str(out), "--push"]) == 0
    printed = capsys.readouterr().out
    from_release = load_eval(out)
    assert from_run is not None and from_release is not None

    # Same models, problems, prompts (chat template, system prompt), answer length, contamination check,
    # answers and verdicts: everything but the time it was made.
    assert replace(from_release.summary, created_at="") == replace(from_run.summary, created_at="")
    assert from_release.samples == from_run.samples
    generation = from_release.summary.generation
    assert generation.max_new_tokens == 12, "the run's max_completion_length, from the published manifest"
    assert generation.system_prompt == gsm8k.SYSTEM_PROMPT and generation.chat_template_from == "run"
    assert from_release.summary.problems.contamination.checked  # the published train_problems.sha256
    assert "up to 12 tokens (the run's max_completion_length)" in printed
    assert f"Results written to {out / 'eval'}" in printed and f"updated card to {new_repo_id}" in printed

    # One commit: the results as written locally, and the card with the evaluation, the merged model kept.
    assert len(hub_api.list_repo_commits(new_repo_id)) == commits + 1
    for name in ("results.json", "samples.jsonl"):
        pushed = Path(hub_api.hf_hub_download(new_repo_id, f"eval/{name}"))
        assert pushed.read_bytes() == (out / "eval" / name).read_bytes()
    readme = Path(hub_api.hf_hub_download(new_repo_id, "README.md")).read_text()
    assert (
        "has not been evaluated yet" not in readme
        and "held-out problems from `gsm8k_heldout.jsonl`" in readme
    )
    assert f"Step 3 merged into the base model is [{merged_repo_id}]" in readme
    assert f"Step 3 is also in GGUF files for llama.cpp, Ollama and LM Studio: [{gguf_repo_id}]" in readme
    assert hub_api.model_info(new_repo_id).card_data.eval_results[0].metric_value == round(
        from_release.by_step(3).accuracy, 4
    )

    # The card is the one a push of the run writes: with these results in the run, a push changes nothing
    # in the adapter repo.
    shutil.rmtree(run_dir / "eval")
    shutil.copytree(out / "eval", run_dir / "eval")
    assert run_cli(push) == 0
    assert len(hub_api.list_repo_commits(new_repo_id)) == commits + 1

    # Pushing the same results again commits nothing.
    api = hub_client(local_hub.endpoint, local_hub.token)
    release, _run = open_release(new_repo_id, (1, 3), endpoint=local_hub.endpoint, token=local_hub.token)
    assert push_release_eval(api, release, from_release, token=local_hub.token).commit_sha is None
    # Results of a step whose adapter changed on the Hub since it was evaluated are refused.
    weights = "checkpoints/global_step_3/adapter_model.safetensors"
    moved = replace(release, files={**release.files, weights: "0" * 64})
    with pytest.raises(PublishError, match=r"changed step\(s\) 3 since they were evaluated: evaluate again"):
        push_release_eval(api, moved, from_release, token=local_hub.token)
    assert len(hub_api.list_repo_commits(new_repo_id)) == commits + 1


def test_eval_of_a_release_says_what_is_wrong_in_one_line(
    trl_run_dir: Path, tiny_qwen3, local_hub, hub_api, new_repo_id: str, tmp_path: Path, capsys
) -> None:
    endpoint = ["--endpoint", local_hub.endpoint, "--problems", str(HELDOUT), "--metric", "gsm8k_correctness"]
    assert run_cli(["eval", "--repo-id", new_repo_id, "--run-dir", str(trl_run_dir)]) == 2
    assert "--run-dir cannot go with --repo-id" in capsys.readouterr().err
    assert run_cli(["eval", "--run-dir", str(trl_run_dir), "--push"]) == 2
    assert "published by `hubkit push`" in capsys.readouterr().err

    assert run_cli(["eval", "--repo-id", new_repo_id, *endpoint]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{new_repo_id} is not on {local_hub.endpoint}" in err
    assert run_cli(["eval", "--repo-id", tiny_qwen3.repo_id, *endpoint]) == 1  # a model, not a release
    assert "has no hubkit.json: it was not published by `hubkit push`" in capsys.readouterr().err

    run_dir = _gsm8k_run(trl_run_dir, tmp_path / "gsm8k-run")
    assert (
        run_cli([*push_argv(run_dir, new_repo_id, local_hub.endpoint), "-q", "--no-merged", "--no-space"])
        == 0
    )
    api = hub_client(local_hub.endpoint, local_hub.token)
    linked = linked_repos(api, read_remote(api, new_repo_id), (1, 2, 3))
    assert (linked.merged_step, linked.gguf_step) == (None, None)  # pushed without a merged model
    assert run_cli(["eval", "--repo-id", new_repo_id, *endpoint, "--steps", "7"]) == 1
    assert "no complete checkpoint at step(s) 7 (complete: 1, 2, 3): fix --steps" in capsys.readouterr().err
    assert not list(tmp_path.glob("*-eval")), "nothing was written"


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--base-model", "Qwen/Qwen3-4B"], "--base-model cannot go with --repo-id"),
        (["--run-id", "r1", "--base-model", "Qwen/Qwen3-4B"], "--run-id and --base-model cannot go with"),
    ],
)
def test_a_run_option_beside_repo_id_is_named_in_the_error(extra, named, capsys) -> None:
    assert run_cli(["eval", "--repo-id", "someone/release", *extra]) == 2
    error = capsys.readouterr().err
    assert named in error and "Traceback" not in error
