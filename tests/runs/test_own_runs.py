"""Runs from people's own scripts: a plain TRL `GRPOTrainer` run (no hubkit.json, no hubkit callback)
publishes as a complete release, its TensorBoard-only twin gets its curves, a watcher started before the
trainer publishes every checkpoint, an Unsloth-style run is published against the full-precision base, and
a re-push does no work it need not (no merge when the merged repo holds this merge already)."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import threading
import time
import zipfile
from pathlib import Path

import pytest
import yaml
from fixtures_runs import TINY_GRPO_ARGS
from helpers import push_argv, run_cli

import hubkit.merge
from hubkit.cards import CardInputs, adapter_card_files, read_base_model_card
from hubkit.cards.merge_record import MergeRecord
from hubkit.errors import TrainingArgsError
from hubkit.formats.training_args import read_training_args
from hubkit.runs import load_run
from hubkit.runs.base_model import is_quantized_name, known_full_precision
from hubkit.runs.trl_settings import trackers_from_args
from hubkit.space.config import SpaceConfig
from tests.support.runs import TINY_SHAPES, finish_run, make_run, write_checkpoint

PROMPTS = [f"What is {a} + {a}?" for a in range(8)]
MAX_STEPS = 4
SAVE_STEPS = 2


def digit_reward(completion_ids: list[list[int]], **_: object) -> list[float]:
    """Share of token ids ending in 0-4: varies between a random model's completions, so the advantage
    (and the LoRA update) is not zero."""
    return [sum(1 for i in ids if i % 10 < 5) / max(len(ids), 1) for ids in completion_ids]


def length_reward(completion_ids: list[list[int]], **_: object) -> list[float]:
    return [-len(ids) / 12 for ids in completion_ids]


def train_plain_grpo(
    output_dir: Path, model_dir: Path, report_to: str, max_steps: int = MAX_STEPS, seed: int = 7
) -> Path:
    """What a user's own script does: GRPOTrainer with LoRA and save_steps, nothing of hubkit."""
    from datasets import Dataset
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer

    config = GRPOConfig(
        output_dir=str(output_dir),
        max_steps=max_steps,
        save_steps=SAVE_STEPS,
        learning_rate=5e-3,
        beta=0.04,
        seed=seed,
        report_to=report_to,
        **TINY_GRPO_ARGS,
    )
    trainer = GRPOTrainer(
        model=str(model_dir),
        reward_funcs=[digit_reward, length_reward],
        args=config,
        train_dataset=Dataset.from_dict({"prompt": PROMPTS}),
        peft_config=LoraConfig(
            r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"
        ),
    )
    trainer.train()
    return output_dir


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory, tiny_qwen3) -> Path:
    """A plain TRL run on the tiny Qwen3, report_to="none"; its adapters name the local model folder."""
    return train_plain_grpo(tmp_path_factory.mktemp("own") / "plain-grpo", Path(tiny_qwen3.local_dir), "none")


@pytest.fixture(scope="module")
def tensorboard_run(tmp_path_factory, tiny_qwen3) -> Path:
    """The same run with report_to="tensorboard"."""
    return train_plain_grpo(
        tmp_path_factory.mktemp("own") / "tb-grpo", Path(tiny_qwen3.local_dir), "tensorboard"
    )


def _readme(hub_api, repo_id: str) -> str:
    return Path(hub_api.hf_hub_download(repo_id, "README.md")).read_text()


# --- a plain GRPOTrainer run -------------------------------------------------------------------------------


def test_training_args_are_read_without_running_the_pickle(plain_run: Path):
    run = load_run(plain_run, base_model="hubkit-test/tiny-qwen3")
    settings = run.trainer_settings
    assert settings is not None and settings.source == "training_args.bin"
    values = settings.values
    assert values["learning_rate"] == 5e-3 and values["per_device_train_batch_size"] == 4
    assert values["num_generations"] == 4 and values["max_completion_length"] == 12
    assert values["seed"] == 7 and values["beta"] == 0.04 and values["max_steps"] == MAX_STEPS
    assert values["lr_scheduler_type"] == "linear" and values["optim"] == "adamw_torch"  # enums: their value
    assert "num_train_epochs" not in values  # max_steps set the length
    # Paths, tokens and hub options are never kept.
    assert not {"output_dir", "hub_token", "logging_dir", "push_to_hub", "hub_model_id"} & set(values)
    assert str(plain_run) not in json.dumps(values)
    assert run.finished and [c.step for c in run.checkpoints] == [2, 4]


def test_a_script_run_twice_into_one_folder_is_two_runs(
    plain_run, tmp_path, tiny_qwen3, local_hub, hub_api, capsys
):
    """TRL lets a script run again into its output_dir without resuming: the second run's checkpoint-2
    overwrites the first's, beside the first's checkpoint-4. Published as one run, step 2 would carry the
    first run's rewards and settings."""
    output_dir = shutil.copytree(plain_run, tmp_path / "twice")
    train_plain_grpo(output_dir, Path(tiny_qwen3.local_dir), "none", max_steps=SAVE_STEPS, seed=8)
    capsys.readouterr()
    argv = [*push_argv(output_dir, "me/twice", local_hub.endpoint), "--base-model", tiny_qwen3.repo_id]
    argv += ["--quiet", "--no-merged", "--no-space"]
    assert run_cli(argv) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "holds the saves of 2 training runs" in err
    assert "steps 4; steps 2" in err and "--steps 4" in err
    assert not hub_api.repo_exists("me/twice")

    second = load_run(output_dir, base_model=tiny_qwen3.repo_id, steps=[2])
    assert [c.step for c in second.checkpoints] == [2] and second.trainer_settings.values["seed"] == 8
    state = json.loads((output_dir / "checkpoint-2" / "trainer_state.json").read_text())
    logged = {r["step"]: r["reward"] for r in state["log_history"] if "reward" in r}
    assert {row.step: row.values["reward"] for row in second.metrics.rows} == logged
    first = load_run(output_dir, base_model=tiny_qwen3.repo_id, steps=[4])
    assert first.trainer_settings.values["seed"] == 7 and first.finished
    assert first.metrics.rows[0].values["reward"] != second.metrics.rows[0].values["reward"]

    assert run_cli([*argv, "--steps", "2"]) == 0
    metrics = Path(hub_api.hf_hub_download("me/twice", "metrics.jsonl")).read_text()
    published = [json.loads(line) for line in metrics.splitlines()]
    assert {r["step"]: r["reward"] for r in published if "reward" in r} == logged


def test_the_space_of_a_plain_run_answers_as_long_as_it_trained(plain_run: Path):
    # The length is in training_args.bin only (no hubkit.json): the Space reads it as `hubkit eval` does.
    run = load_run(plain_run, base_model="hubkit-test/tiny-qwen3")
    assert not run.manifest.hyperparameters
    assert SpaceConfig.from_run(run, "me/plain-run").app.max_new_tokens == 12


def test_a_training_args_file_naming_another_global_is_refused_unread(tmp_path: Path):
    import torch

    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    path = tmp_path / "training_args.bin"
    torch.save({"learning_rate": 1e-5, "x": Payload()}, path)
    with pytest.raises(TrainingArgsError, match=r"names posix\.system, which is not a transformers"):
        read_training_args(path)
    assert not marker.exists()
    # Protocol 4 (STACK_GLOBAL names its class through strings, FRAME ops torch's listing does not read):
    # refused unread all the same.
    torch.save({"learning_rate": 1e-5}, tmp_path / "saved.bin")
    with (
        zipfile.ZipFile(tmp_path / "saved.bin") as saved,
        zipfile.ZipFile(tmp_path / "other.bin", "w") as archive,
    ):
        for info in saved.infolist():
            stack_global = pickle.dumps(Payload(), protocol=4)
            archive.writestr(info, stack_global if info.filename.endswith("/data.pkl") else saved.read(info))
    with pytest.raises(TrainingArgsError, match=r"other\.bin: not a readable pickle"):
        read_training_args(tmp_path / "other.bin")
    assert not marker.exists()


def test_a_plain_grpo_run_publishes_a_card_with_what_the_trainer_recorded(
    plain_run: Path, tiny_qwen3, local_hub, hub_api, new_repo_id, capsys, monkeypatch
):
    push = push_argv(plain_run, new_repo_id, local_hub.endpoint)
    assert run_cli([*push, "--base-model", tiny_qwen3.repo_id]) == 0
    card = _readme(hub_api, new_repo_id)
    for row in (
        "| `learning_rate` | 0.005 | `training_args.bin` |",
        "| `per_device_train_batch_size` | 4 | `training_args.bin` |",
        "| `num_generations` | 4 | `training_args.bin` |",
        "| `max_completion_length` | 12 | `training_args.bin` |",
        "| `seed` | 7 | `training_args.bin` |",
        "| `beta` | 0.04 | `training_args.bin` |",
        f"| base model | {tiny_qwen3.repo_id} | `--base-model` |",
        "| LoRA rank r | 8 | `adapter_config.json` |",
    ):
        assert row in card, row
    # Every reward function, named from TRL's metric keys, with what is not known said so.
    assert "| `digit_reward` | 1.0 | definition not recorded |" in card
    assert "| `length_reward` | 1.0 | definition not recorded |" in card
    assert "2 reward functions (`digit_reward`, `length_reward`), whose definitions were not recorded" in card
    # One training status, said alike in the intro and in Run details.
    assert "Training finished at step 4 of 4." in card and "| training | finished at step 4 of 4 |" in card
    assert "still training" not in card and "still running" not in card
    space = f"{new_repo_id}-demo"
    link = f"[{space}](https://huggingface.co/spaces/{space})"
    assert link in card and link in _readme(hub_api, f"{new_repo_id}-merged")
    assert str(plain_run) not in card and "hub_token" not in card
    assert "max_new_tokens=12" in card  # the usage answers as long as the run's completions were
    # The published manifest carries what the trainer recorded: a release read back knows it too.
    manifest = json.loads(Path(hub_api.hf_hub_download(new_repo_id, "hubkit.json")).read_text())
    assert manifest["hyperparameters"]["max_completion_length"] == 12
    assert manifest["hyperparameters"]["learning_rate"] == 5e-3
    space_config = Path(hub_api.hf_hub_download(space, "space_config.json", repo_type="space")).read_text()
    assert json.loads(space_config)["max_new_tokens"] == 12

    # An unchanged re-push with the merge enabled merges nothing and commits nothing.
    commits = {r: len(hub_api.list_repo_commits(r)) for r in (new_repo_id, f"{new_repo_id}-merged")}

    def no_merge(*_args, **_kwargs):
        raise AssertionError("the merged repo already holds this merge")

    monkeypatch.setattr(hubkit.merge, "execute_plan", no_merge)
    capsys.readouterr()
    assert run_cli([*push, "--base-model", tiny_qwen3.repo_id]) == 0
    assert "already holds step 4 merged into this base: not merged again" in capsys.readouterr().out
    assert {r: len(hub_api.list_repo_commits(r)) for r in commits} == commits
    # --no-merged does not forget the merged repo: the card keeps its section and usage.
    # --no-merged --no-space forget neither: the card keeps the merged section and the Space's link.
    assert run_cli([*push, "--base-model", tiny_qwen3.repo_id, "--no-merged", "--no-space", "--quiet"]) == 0
    assert len(hub_api.list_repo_commits(new_repo_id)) == commits[new_repo_id]
    card = _readme(hub_api, new_repo_id)
    assert link in card
    assert f"Step 4 merged into the base model is [{new_repo_id}-merged]" in card
    assert f'AutoModelForCausalLM.from_pretrained("{new_repo_id}-merged")' in card


def test_a_tensorboard_only_run_gets_its_curves(tensorboard_run: Path, tmp_path: Path, tiny_qwen3, local_hub):
    logged = load_run(tensorboard_run, base_model=tiny_qwen3.repo_id)
    # A run whose metrics live only in TensorBoard (verl's tensorboard logger; here TRL's log history cut).
    run_dir = tmp_path / "tb-only"
    run_dir.mkdir()
    shutil.copytree(tensorboard_run / "runs", run_dir / "runs")
    for checkpoint in ("checkpoint-2", "checkpoint-4"):
        target = run_dir / checkpoint
        target.mkdir()
        for item in (tensorboard_run / checkpoint).iterdir():
            (target / item.name).symlink_to(item)
        state = json.loads((target / "trainer_state.json").read_text())
        (target / "trainer_state.json").unlink()
        (target / "trainer_state.json").write_text(json.dumps({**state, "log_history": []}))
    run = load_run(run_dir, base_model=tiny_qwen3.repo_id)
    assert run.metrics_source == "TensorBoard event files"
    # TensorBoard keeps float32: every value the log history held comes back to float32 precision.
    for name in ("reward", "rewards/digit_reward/mean", "loss", "learning_rate"):
        expected = logged.metrics.series(name)
        got = run.metrics.series(name)
        assert [s for s, _ in got] == [s for s, _ in expected] == [1, 2, 3, 4], name
        assert all(
            abs(a - b) <= 1e-6 * max(1.0, abs(b)) for (_, a), (_, b) in zip(got, expected, strict=True)
        )
    inputs = CardInputs(
        run=run,
        repo_id="me/tb-only",
        steps=(2, 4),
        base=read_base_model_card(tiny_qwen3.repo_id, None, endpoint=local_hub.endpoint),
    )
    files = adapter_card_files(inputs)
    assert {"assets/reward.png", "assets/response_length.png"} <= set(files)
    card = files["README.md"].decode()
    assert "The metrics were read from the run's TensorBoard event files." in card
    assert "| tracker: tensorboard | event files in the run directory (not published) |" in card
    assert "`digit_reward`" in card


def test_trackers_named_by_report_to_are_linked_when_the_run_says_where(tmp_path: Path):
    (tmp_path / "wandb" / "run-20260301_120000-3xk2a9qz").mkdir(parents=True)
    fields = {
        "report_to": ["wandb", "trackio", "tensorboard"],
        "trackio_space_id": "me/trackio",
        "project": "gsm8k",
    }
    wandb, trackio, tensorboard = trackers_from_args(fields, tmp_path)
    assert (wandb.name, wandb.url, wandb.detail) == ("wandb", None, "run 3xk2a9qz")
    assert (trackio.url, trackio.detail) == ("https://huggingface.co/spaces/me/trackio", "project gsm8k")
    assert tensorboard.name == "tensorboard" and tensorboard.url is None
    assert trackers_from_args({"report_to": []}, tmp_path) == ()


# --- the watcher waits for the trainer --------------------------------------------------------------------


def test_watch_started_before_the_run_folder_exists_publishes_every_checkpoint(
    tmp_path, tiny_qwen3, local_hub, hub_api, new_repo_id, capsys
):
    run_dir = tmp_path / "runs" / "not-yet"

    def published(step: int) -> bool:
        return hub_api.file_exists(new_repo_id, f"checkpoints/global_step_{step}/adapter_config.json")

    def train() -> None:
        time.sleep(0.5)  # the watcher looks at a folder that does not exist
        run_dir.mkdir(parents=True)
        time.sleep(0.5)  # ... then at one without a checkpoint
        for step in (1, 2, 3):
            deadline = time.monotonic() + 60
            while step > 1 and not published(step - 1) and time.monotonic() < deadline:
                time.sleep(0.05)
            write_checkpoint(run_dir, step, base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES, max_steps=3)

    trainer = threading.Thread(target=train)
    trainer.start()
    try:
        argv = [*push_argv(run_dir, new_repo_id, local_hub.endpoint), "--no-merged", "--no-space"]
        code = run_cli([*argv, "--watch", "--watch-interval", "0.1", "--watch-timeout", "60"])
    finally:
        trainer.join()
    assert code == 0
    out = capsys.readouterr().out
    assert out.count("Waiting for the first checkpoint of not-yet") == 1
    files = hub_api.list_repo_files(new_repo_id)
    assert {f"checkpoints/global_step_{s}/adapter_model.safetensors" for s in (1, 2, 3)} <= set(files)
    assert "Training finished at step 3 of 3." in _readme(hub_api, new_repo_id)


def test_watch_timeout_gives_up_on_a_run_that_never_saves(tmp_path, local_hub, new_repo_id, capsys):
    argv = push_argv(tmp_path / "never", new_repo_id, local_hub.endpoint)
    started = time.monotonic()
    assert run_cli([*argv, "--watch", "--watch-interval", "0.1", "--watch-timeout", "0.5"]) == 1
    assert time.monotonic() - started < 30
    err = capsys.readouterr().err
    assert (
        "no new checkpoint of never in 0.5 s (--watch-timeout)" in err and len(err.strip().splitlines()) == 1
    )


# --- a re-push does no work it need not ---------------------------------------------------------------------


def test_a_new_checkpoint_merges_once_and_no_merged_keeps_the_merged_section(
    tmp_path, tiny_qwen3, local_hub, hub_api, new_repo_id, monkeypatch
):
    merges: list[Path] = []
    execute_plan = hubkit.merge.execute_plan

    def counted(plan, out_dir, progress=None):
        merges.append(out_dir)
        return execute_plan(plan, out_dir, progress)

    monkeypatch.setattr(hubkit.merge, "execute_plan", counted)
    run_dir = make_run(tmp_path / "runs", (1,), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    push = [*push_argv(run_dir, new_repo_id, local_hub.endpoint), "--no-space", "--quiet"]
    merged_id = f"{new_repo_id}-merged"
    assert run_cli(push) == 0 and len(merges) == 1
    write_checkpoint(run_dir, 2, base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    assert run_cli(push) == 0 and len(merges) == 2  # the new checkpoint: merged once
    record = MergeRecord.from_card_data(hub_api.model_info(merged_id).card_data.to_dict())
    assert record is not None and record.step == 2 and record.adapter_repo == new_repo_id
    assert record.base_revision == hub_api.model_info(tiny_qwen3.repo_id).sha
    commits = len(hub_api.list_repo_commits(merged_id))
    assert run_cli(push) == 0 and len(merges) == 2  # unchanged: not merged again
    assert len(hub_api.list_repo_commits(merged_id)) == commits

    # A checkpoint pushed with --no-merged: the card is rewritten, and still links the merge (step 2).
    write_checkpoint(run_dir, 3, base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    finish_run(run_dir)
    assert run_cli([*push, "--no-merged"]) == 0 and len(merges) == 2
    card = _readme(hub_api, new_repo_id)
    assert "steps 1, 2, 3" in card and f"Step 2 merged into the base model is [{merged_id}]" in card
    assert len(hub_api.list_repo_commits(merged_id)) == commits
    # The merge enabled again: step 3 is merged, once, and the card says so.
    assert run_cli(push) == 0 and len(merges) == 3
    assert f"Step 3 merged into the base model is [{merged_id}]" in _readme(hub_api, new_repo_id)


# --- Unsloth and QLoRA ------------------------------------------------------------------------------------


def test_quantized_base_names_are_known_or_detected():
    assert known_full_precision("unsloth/Qwen2.5-3B-Instruct-bnb-4bit") == "Qwen/Qwen2.5-3B-Instruct"
    assert known_full_precision("unsloth/qwen3-4b-unsloth-bnb-4bit") == "Qwen/Qwen3-4B"
    for name in ("unsloth/Qwen3-4B-bnb-4bit", "someone/Llama-3-8B-4bit", "x/model-GPTQ-Int4", "x/m-AWQ"):
        assert is_quantized_name(name), name
    for name in ("Qwen/Qwen3-4B", "unsloth/Qwen3-4B", "x/4bit-is-not-a-suffix-here"):
        assert not is_quantized_name(name), name


def test_an_unsloth_run_maps_to_the_known_full_precision_base(tmp_path: Path):
    run_dir = make_run(
        tmp_path, (1,), base_model="unsloth/Qwen3-4B-bnb-4bit", shapes=TINY_SHAPES, manifest=False, run_id="u"
    )
    run = load_run(run_dir)
    assert (
        run.manifest.base_model == "Qwen/Qwen3-4B"
        and run.base_model_source == "hubkit's table of quantized bases"
    )
    assert run.quantized_base.trained_on == "unsloth/Qwen3-4B-bnb-4bit"
    assert "published against Qwen/Qwen3-4B" in run.quantized_base.note


def test_an_unsloth_style_run_publishes_with_the_full_precision_base_everywhere(
    tmp_path, tiny_qwen3, local_hub, hub_api, new_repo_id, capsys
):
    quantized = f"{tiny_qwen3.repo_id}-bnb-4bit"  # as Unsloth's load_in_4bit names the base
    run_dir = make_run(
        tmp_path, (1, 2), base_model=quantized, shapes=TINY_SHAPES, manifest=False, max_steps=2
    )
    push = push_argv(run_dir, new_repo_id, local_hub.endpoint)
    # Without the full-precision base: refused before anything is sent (a 4-bit base is not merged into,
    # and the Space's requirements cannot load it).
    assert run_cli([*push, "--dry-run"]) == 1
    assert "cannot be merged into; pass --base-model ORG/NAME" in capsys.readouterr().err
    assert run_cli([*push, "--dry-run", "--no-merged"]) == 1
    assert "requirements lack bitsandbytes" in capsys.readouterr().err
    assert not hub_api.repo_exists(new_repo_id)

    assert run_cli([*push, "--base-model", tiny_qwen3.repo_id]) == 0
    out = capsys.readouterr().out
    assert f"trained on {quantized} (4-bit, QLoRA): published against {tiny_qwen3.repo_id}" in out
    for repo_id in (new_repo_id, f"{new_repo_id}-merged"):
        assert hub_api.model_info(repo_id).card_data.base_model == tiny_qwen3.repo_id
        card = _readme(hub_api, repo_id)
        assert (
            "Trained as QLoRA (4-bit base)" in card
            and "qlora" in yaml.safe_load(card.split("---\n")[1])["tags"]
        )
        # The quantized base is named only where the card says what the run trained on.
        assert all(
            "Trained as QLoRA" in line or "QLoRA" in line for line in card.splitlines() if quantized in line
        )
    for path in ("adapter_config.json", "checkpoints/global_step_1/adapter_config.json"):
        config = json.loads(Path(hub_api.hf_hub_download(new_repo_id, path)).read_text())
        assert config["base_model_name_or_path"] == tiny_qwen3.repo_id
    space = json.loads(
        Path(
            hub_api.hf_hub_download(f"{new_repo_id}-demo", "space_config.json", repo_type="space")
        ).read_text()
    )
    assert quantized not in json.dumps(space) and tiny_qwen3.repo_id in json.dumps(space)


# --- what the commands say --------------------------------------------------------------------------------


def test_hubkit_card_previews_the_repo_push_would_publish(tmp_path, tiny_qwen3, local_hub, hub_api):
    run_dir = make_run(
        tmp_path / "runs", (1,), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES, run_id="run1"
    )
    out = tmp_path / "preview"
    argv = ["card", "--run-dir", str(run_dir), "--out", str(out), "--endpoint", local_hub.endpoint, "--quiet"]
    assert run_cli(argv) == 0
    owner = hub_api.whoami()["name"]  # as `hubkit push` chooses the repo: <token owner>/<run id>
    card = (out / "README.md").read_text()
    assert card.splitlines()[card.splitlines().index("---", 1) + 2] == f"# {owner}/run1"
    assert f"https://huggingface.co/spaces/{owner}/run1-demo" in card
    assert f"# {owner}/run1-merged" in (out / "merged" / "README.md").read_text()


def test_hubkit_card_previews_before_logging_in(tmp_path, tiny_qwen3, local_hub, monkeypatch):
    """The README's preview before `hf auth login`: no token, so a placeholder owner, and no traceback."""
    run_dir = make_run(
        tmp_path / "runs", (1,), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES, run_id="run1"
    )
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # no token stored by `hf auth login` either
    out = tmp_path / "preview"
    argv = ["card", "--run-dir", str(run_dir), "--out", str(out), "--endpoint", local_hub.endpoint, "--quiet"]
    assert run_cli(argv) == 0
    card = (out / "README.md").read_text()
    assert "# your-username/run1" in card
    assert "# your-username/run1-merged" in (out / "merged" / "README.md").read_text()


def test_a_verl_run_logged_to_tensorboard_reads_its_metrics_from_the_event_files(tmp_path: Path):
    from torch.utils.tensorboard import SummaryWriter

    from hubkit.runs.manifest import Manifest

    Manifest(run_id="verl-tb", framework="verl", base_model="Qwen/Qwen3-4B").save(tmp_path)
    # verl's tensorboard logger: tensorboard_log/<project>/<experiment>/, tags as verl names its metrics.
    writer = SummaryWriter(str(tmp_path / "tensorboard_log" / "gdpo" / "exp1"))
    for step in (1, 2, 3):
        writer.add_scalar("critic/score/mean", 0.25 * step, step)
        writer.add_scalar("response_length/mean", 100.0 + step, step)
    writer.close()
    run = load_run(tmp_path)
    assert run.metrics_source == "TensorBoard event files" and run.trackers[0].name == "tensorboard"
    assert run.metrics.series("critic/score/mean") == [(1, 0.25), (2, 0.5), (3, 0.75)]
    assert run.metrics.series("response_length/mean") == [(1, 101.0), (2, 102.0), (3, 103.0)]
