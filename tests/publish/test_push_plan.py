"""Planning and diffing a push, and the refusals that happen before any connection (no Hub needed)."""

from __future__ import annotations

import dataclasses
import json
import socket
import subprocess
from pathlib import Path, PurePosixPath

import pytest
import yaml
from helpers import push_argv, run_cli
from safetensors.torch import load_file

from hubkit.adapters.prepare import prepare_adapters
from hubkit.cards import BaseModelCard
from hubkit.errors import CheckpointError, LocalPathInFileError, PublishError, SecretInFileError
from hubkit.hub.hashing import FileHashCache, hash_bytes, hash_file
from hubkit.hub.remote import RemoteFile, RemoteRepo
from hubkit.publish.adapter_repo import plan_adapter_repo, plan_run_files, published_forms
from hubkit.publish.commit import commit_message
from hubkit.publish.diff import diff_repo
from hubkit.publish.plan import PlannedFile, RepoPlan
from hubkit.publish.release_repos import ReleaseLinks, ReleaseRepos
from hubkit.publish.repos import BuildContext, build_adapter_repo
from hubkit.publish.request import PushRequest
from hubkit.publish.vetted import Vetter
from hubkit.runs import load_run, select_checkpoints
from hubkit.safety import VetContext, kinds, vet_bytes
from tests.support.runs import make_run, qwen3_shapes, write_checkpoint

BASE = "hubkit-test/tiny-qwen3"
SHAPES = qwen3_shapes(hidden=32, q_out=64, v_out=16, layers=2)


@pytest.fixture
def tokenizer_dir(tmp_path: Path) -> Path:
    """A small real tokenizer, one of whose vocabulary tokens is the home directory's name."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel

    path = tmp_path / "tok"
    path.mkdir()
    (path / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 128}))
    vocab = {"[UNK]": 0, str(Path.home()): 1, "a": 2}
    (path / "tokenizer.json").write_text(Tokenizer(WordLevel(vocab, unk_token="[UNK]")).to_str())
    (path / "chat_template.jinja").write_text("{% for m in messages %}{{ m.content }}{% endfor %}")
    return path


@pytest.fixture
def run_dir(tmp_path: Path, tokenizer_dir: Path) -> Path:
    return make_run(tmp_path / "runs", (1, 2, 3), base_model=BASE, shapes=SHAPES, tokenizer_dir=tokenizer_dir)


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """Fail any attempt to open a socket connection; returns the attempts."""
    attempts: list[tuple] = []

    def refuse(self: socket.socket, address: tuple) -> None:
        attempts.append(address)
        raise AssertionError(f"unexpected connection to {address}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    return attempts


def _plan(run_dir: Path, tmp_path: Path, steps=None, repo_id: str = "me/tiny-run", token: str | None = None):
    """The adapter repo's plan for a first push (nothing on the remote yet), built as a push builds it."""
    run = load_run(run_dir)
    vetter = Vetter(VetContext.for_run(run.run_dir, BASE, token))
    chosen = select_checkpoints(run, steps)
    adapters = prepare_adapters(run, chosen, tmp_path / "staging", forms=published_forms(chosen, vetter))
    hashes = FileHashCache()
    run_files = plan_run_files(run, adapters, vetter=vetter, hashes=hashes)
    context = BuildContext(
        run=run,
        repos=ReleaseRepos.of(PushRequest(run_dir, space=False), repo_id),
        adapters=tuple(adapters),
        run_files=run_files,
        adapter_files=plan_adapter_repo(run, repo_id, run_files),
        remotes={repo_id: RemoteRepo(repo_id, head_sha=None)},
        base_card=BaseModelCard(repo_id=BASE, license="apache-2.0"),
        hashes=hashes,
        vetter=vetter,
        links=ReleaseLinks(),
    )
    return build_adapter_repo(context)


def test_plan_lays_out_checkpoints_root_adapter_and_metadata(run_dir: Path, tmp_path: Path) -> None:
    plan = _plan(run_dir, tmp_path)
    by_path = {f.path_in_repo: f for f in plan.files}
    assert set(by_path) == {
        *(
            f"checkpoints/global_step_{s}/{n}"
            for s in (1, 2, 3)
            for n in ("adapter_model.safetensors", "adapter_config.json")
        ),
        "adapter_model.safetensors",
        "adapter_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "chat_template.jinja",
        "hubkit.json",
        "metrics.jsonl",
        "runs/events.out.tfevents.hubkit",
        "README.md",
        "assets/reward.png",  # the one curve this run logged (its metrics have a reward only)
    }
    # The root adapter is the newest step's; every checkpoint's weights are the checkpoint's own.
    assert (
        by_path["adapter_model.safetensors"].hashes
        == by_path["checkpoints/global_step_3/adapter_model.safetensors"].hashes
    )
    for step in (1, 2, 3):
        published = load_file(by_path[f"checkpoints/global_step_{step}/adapter_model.safetensors"].local_path)
        saved = load_file(run_dir / f"checkpoint-{step}" / "adapter_model.safetensors")
        assert published.keys() == saved.keys()
        assert all((published[k] == saved[k]).all() for k in saved)
    assert plan.steps == (1, 2, 3)
    config = json.loads(by_path["adapter_config.json"].read_bytes())
    assert config["base_model_name_or_path"] == BASE
    manifest = json.loads(by_path["hubkit.json"].read_bytes())
    assert manifest["run_id"] == "synthetic-run"
    assert manifest["checkpoints_dir"] == "checkpoints" and manifest["metrics_file"] == "metrics.jsonl"
    rows = [json.loads(line) for line in by_path["metrics.jsonl"].read_bytes().decode().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]


def test_card_front_matter_and_usage_snippet(run_dir: Path, tmp_path: Path) -> None:
    plan = _plan(run_dir, tmp_path, steps=(1, 3))
    card = next(f for f in plan.files if f.path_in_repo == "README.md").read_bytes().decode()
    front, body = card.removeprefix("---\n").split("\n---\n", 1)
    metadata = yaml.safe_load(front)
    assert metadata["base_model"] == BASE
    assert metadata["library_name"] == "peft"
    assert metadata["base_model_relation"] == "adapter"
    assert metadata["pipeline_tag"] == "text-generation"
    assert "trl" in metadata["tags"]
    assert 'PeftModel.from_pretrained(base, "me/tiny-run")' in body
    assert 'subfolder="checkpoints/global_step_3"' in body
    assert metadata["license"] == "apache-2.0"  # the base card's
    assert "`checkpoints/global_step_1`" in body and "global_step_2" not in body


def test_git_blob_sha1_matches_git(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_bytes(b'{"a": 1}\n' * 1000)
    expected = subprocess.run(
        ["git", "hash-object", str(path)], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert hash_file(path).git_sha1 == expected


def test_diff_compares_lfs_by_sha256_and_regular_files_by_blob_sha1(run_dir: Path, tmp_path: Path) -> None:
    plan = _plan(run_dir, tmp_path)
    by_path = {f.path_in_repo: f for f in plan.files}
    lfs_same = by_path["checkpoints/global_step_1/adapter_model.safetensors"]
    regular_same = by_path["checkpoints/global_step_1/adapter_config.json"]
    lfs_other = by_path["checkpoints/global_step_2/adapter_model.safetensors"]
    remote = RemoteRepo(
        repo_id=plan.repo_id,
        head_sha="a" * 40,
        files={
            lfs_same.path_in_repo: RemoteFile(
                lfs_same.path_in_repo, lfs_same.size, "0" * 40, lfs_same.hashes.sha256
            ),
            regular_same.path_in_repo: RemoteFile(
                regular_same.path_in_repo, regular_same.size, regular_same.hashes.git_sha1
            ),
            # Same size, different content:
            lfs_other.path_in_repo: RemoteFile(lfs_other.path_in_repo, lfs_other.size, "0" * 40, "f" * 64),
            "unrelated.txt": RemoteFile("unrelated.txt", 3, "1" * 40),
        },
    )
    diff = diff_repo(plan, remote)
    assert {f.path_in_repo for f in diff.unchanged} == {lfs_same.path_in_repo, regular_same.path_in_repo}
    assert lfs_other in diff.changed and len(diff.changed) == len(plan.files) - 2
    assert diff.changed_steps == (2, 3)
    summary, description = commit_message(diff)
    assert summary == "hubkit push synthetic-run: steps 2, 3"
    assert "- checkpoints/global_step_3/adapter_model.safetensors" in description.splitlines()
    # Against itself, nothing changes.
    same = RemoteRepo(
        plan.repo_id,
        "b" * 40,
        {f.path_in_repo: RemoteFile(f.path_in_repo, f.size, f.hashes.git_sha1) for f in plan.files},
    )
    assert diff_repo(plan, same).is_empty


def test_select_checkpoints(run_dir: Path) -> None:
    run = load_run(run_dir)
    assert [c.step for c in select_checkpoints(run)] == [1, 2, 3]
    assert [c.step for c in select_checkpoints(run, every=2)] == [2]
    assert [c.step for c in select_checkpoints(run, steps=(3, 1))] == [1, 3]
    with pytest.raises(CheckpointError, match=r"no complete checkpoint at step\(s\) 5 \(complete: 1, 2, 3\)"):
        select_checkpoints(run, steps=(1, 5))
    # A run still training saves listed steps later: they are left out, not refused.
    assert [c.step for c in select_checkpoints(run, steps=(1, 5), allow_missing=True)] == [1]
    assert select_checkpoints(run, steps=(5,), every=2, allow_missing=True) == ()


def test_training_state_and_pickles_are_left_out_of_the_plan(run_dir: Path, tmp_path: Path) -> None:
    checkpoint = run_dir / "checkpoint-3"
    for name in ("rng_state.pth", "scheduler.pt", "data.pkl", "adapter_model.bin", "notes.txt"):
        (checkpoint / name).write_bytes(b"\x80\x04 pickled")
    names = {PurePosixPath(f.path_in_repo).name for f in _plan(run_dir, tmp_path).files}
    assert names.isdisjoint(
        {
            "optimizer.pt",
            "training_args.bin",
            "trainer_state.json",
            "rng_state.pth",
            "scheduler.pt",
            "data.pkl",
        }
    )
    assert names.isdisjoint({"adapter_model.bin", "notes.txt"})


def test_model_path_fields_become_the_hub_id_and_other_local_paths_are_refused(
    run_dir: Path, tmp_path: Path
) -> None:
    config = run_dir / "checkpoint-3" / "tokenizer_config.json"
    config.write_text(json.dumps({"name_or_path": str(run_dir), "model_max_length": 128}))
    published = next(f for f in _plan(run_dir, tmp_path).files if f.path_in_repo == "tokenizer_config.json")
    assert json.loads(published.read_bytes())["name_or_path"] == BASE
    config.write_text(json.dumps({"model_max_length": 128, "cache": str(run_dir / "cache")}))
    with pytest.raises(LocalPathInFileError, match=r"checkpoint-3/tokenizer_config\.json: it holds the path"):
        _plan(run_dir, tmp_path / "again")


def test_the_token_in_use_is_refused_and_never_echoed(run_dir: Path, tmp_path: Path) -> None:
    token = "secret-token-value-123"
    (run_dir / "checkpoint-3" / "chat_template.jinja").write_text("{# " + token + " #}{{ messages }}")
    with pytest.raises(SecretInFileError) as error:
        _plan(run_dir, tmp_path, token=token)
    assert "the Hugging Face token in use" in str(error.value) and token not in str(error.value)


def test_repo_plan_checks_ids_paths_and_kinds(tmp_path: Path) -> None:
    with pytest.raises(PublishError, match="use OWNER/NAME"):
        RepoPlan(repo_id="no-namespace", files=())
    with pytest.raises(PublishError, match="invalid path in repo"):
        PlannedFile("../escape.txt", kinds.CARD, hash_bytes(b"x"), content=b"x")
    context = VetContext(hub_base_id=BASE, run_dir=tmp_path)
    card = PlannedFile.from_vetted(
        vet_bytes("README.md", kinds.CARD, b"# a card\n", context), FileHashCache()
    )
    with pytest.raises(PublishError, match="planned twice"):
        RepoPlan(repo_id="me/x", files=(card, card))
    # A file is planned only where its kind goes: a card is not a Space module, a config not a card.
    with pytest.raises(PublishError, match=r"app\.txt cannot be published as a model card in a space repo"):
        RepoPlan(
            repo_id="me/x",
            files=(dataclasses.replace(card, path_in_repo="app.txt"),),
            repo_type="space",
            space_sdk="gradio",
        )
    with pytest.raises(PublishError, match=r"README\.md cannot be published as an adapter config"):
        RepoPlan(repo_id="me/x", files=(dataclasses.replace(card, kind=kinds.ADAPTER_CONFIG),))


# --- the CLI, before any connection --------------------------------------------------------------


def test_dry_run_prints_the_plan_and_opens_no_connection(
    run_dir: Path, no_network: list, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    code = run_cli(
        [
            "push",
            "--run-dir",
            str(run_dir),
            "--repo-id",
            "me/tiny-run",
            "--dry-run",
            "--every",
            "2",
            "--endpoint",
            "https://hub.invalid",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "me/tiny-run (model, public if created)" in out
    assert "checkpoints/global_step_2/adapter_model.safetensors" in out
    assert "global_step_1" not in out and "global_step_3" not in out
    planned = [line for line in out.splitlines() if line.startswith("  new ")]
    assert planned and not [line for line in planned if "optimizer" in line or "training_args" in line]
    # What the chosen checkpoint's folder holds besides is listed, with why it is left out.
    assert "Checkpoints from the run directory" in out
    left_out = out.split("Left out of checkpoint-2 (never published):\n", 1)[1].splitlines()
    assert left_out[0].split() == ["optimizer.pt", "optimizer", "state"]
    assert left_out[2].startswith("  training_args.bin ") and "a pickle" in left_out[2]
    assert "me/tiny-run-demo (space" in out and "  steps: 2" in out
    assert all(line.strip() != "steps:" for line in out.splitlines())  # the Space holds no step
    assert no_network == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--run-id", "nope", "--runs-dir", "RUNS"], "no run 'nope'"),
        (["--run-dir", "RUN", "--steps", "2,9"], "no complete checkpoint at step(s) 9"),
        (["--run-dir", "RUN", "--repo-id", "bad//id"], "invalid repo id 'bad//id'"),
        (["--run-dir", "RUN", "--endpoint", "https://huggingface.co"], "no Hugging Face token"),
    ],
)
def test_refusals_before_any_connection(
    run_dir: Path,
    no_network: list,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    argv: list[str],
    message: str,
) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # no stored login either
    monkeypatch.setattr("huggingface_hub.constants.HF_TOKEN_PATH", str(tmp_path / "hf-home" / "token"))
    argv = [a.replace("RUNS", str(run_dir.parent)).replace("RUN", str(run_dir)) for a in argv]
    if "--repo-id" not in argv:
        argv += ["--repo-id", "me/tiny-run"]
    if "--endpoint" not in argv:
        argv += ["--endpoint", "http://127.0.0.1:9"]
    code = run_cli(["push", *argv])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("Error: ") and message in err and len(err.strip().splitlines()) == 1
    assert no_network == []


def test_a_nan_adapter_is_refused_before_any_connection(
    run_dir: Path, no_network: list, capsys: pytest.CaptureFixture[str]
) -> None:
    write_checkpoint(run_dir, 4, base_model=BASE, shapes=SHAPES, fill=float("nan"))
    code = run_cli(push_argv(run_dir, "me/tiny-run", "http://127.0.0.1:9"))
    err = capsys.readouterr().err
    assert code == 1 and "checkpoint-4" in err and "NaN" in err
    assert no_network == []


@pytest.mark.parametrize("command", ["push", "merge"])
def test_a_run_without_complete_checkpoints_is_refused_saying_why(
    tmp_path: Path, no_network: list, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    run_dir = make_run(tmp_path / "runs", (), base_model=BASE, shapes=SHAPES)
    destination = ["--repo-id", "me/tiny-run"] if command == "push" else ["--out", str(tmp_path / "merged")]
    argv = [command, "--run-dir", str(run_dir), *destination, "--endpoint", "http://127.0.0.1:9"]
    assert run_cli(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        "Error: run synthetic-run has no complete checkpoint to publish yet: it has no checkpoint"
    )

    # One checkpoint still being saved (no trainer_state.json yet), one whose state names another step.
    write_checkpoint(run_dir, 1, base_model=BASE, shapes=SHAPES)
    write_checkpoint(run_dir, 2, base_model=BASE, shapes=SHAPES)
    (run_dir / "checkpoint-1" / "trainer_state.json").unlink()
    state = json.loads((run_dir / "checkpoint-2" / "trainer_state.json").read_text())
    (run_dir / "checkpoint-2" / "trainer_state.json").write_text(json.dumps({**state, "global_step": 1}))
    assert run_cli(argv) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "checkpoint-1: it has no readable trainer_state.json" in err
    assert "checkpoint-2: its trainer_state.json records global_step 1, not 2" in err
    assert "wait for the save to finish" in err
    assert no_network == []
    assert not (tmp_path / "merged").exists()


def test_dry_run_and_watch_do_not_combine(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = run_cli(["push", "--run-dir", str(run_dir), "--repo-id", "me/tiny-run", "--dry-run", "--watch"])
    assert code == 2 and "--dry-run and --watch cannot be combined" in capsys.readouterr().err


def test_a_token_in_a_tokenizer_file_is_refused_before_any_connection(
    run_dir: Path, no_network: list, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    token = "hf_" + "Zq9" * 12
    monkeypatch.setenv("HF_TOKEN", token)
    config = run_dir / "checkpoint-3" / "tokenizer_config.json"
    config.write_text(json.dumps({"model_max_length": 128, "auth": token}))
    code = run_cli(push_argv(run_dir, "me/tiny-run", "http://127.0.0.1:9"))
    err = capsys.readouterr().err
    assert code == 1
    assert err == (
        "Error: refusing to publish checkpoint-3/tokenizer_config.json: it holds a Hugging Face token "
        "(in field auth); remove it and push again\n"
    )
    assert no_network == []


def test_run_id_is_looked_up_under_hubkit_runs_dir(
    run_dir: Path, no_network: list, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HUBKIT_RUNS_DIR", str(run_dir.parent))
    monkeypatch.chdir(run_dir)  # no runs/ here: only the variable can find the run
    assert (
        run_cli(["push", "--run-id", run_dir.name, "--repo-id", "me/tiny-run", "--dry-run", "--no-merged"])
        == 0
    )
    assert "checkpoints/global_step_3/adapter_model.safetensors" in capsys.readouterr().out
    assert no_network == []
