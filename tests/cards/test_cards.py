"""Model cards written from the run itself, checked value by value against the run; their images; their
usage snippets run against the local Hub; the reward read back from a published repo; the templates
shipped in the wheel."""

from __future__ import annotations

import ast
import io
import json
import logging
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from eval_results import write_eval
from helpers import push_argv, run_cli
from huggingface_hub import snapshot_download

from hubkit.cards import (
    BaseModelCard,
    CardInputs,
    adapter_card_files,
    merged_card_files,
    plots,
    read_base_model_card,
)
from hubkit.cards.merge_record import MergeRecord
from hubkit.cards.metrics import key_metric_series
from hubkit.errors import ReleaseError, RepoNotFoundError
from hubkit.release.read import read_release_reward
from hubkit.rewards import gsm8k
from hubkit.rewards.spec import RewardSpec, deepscaler_length_penalty, gsm8k_seed
from hubkit.runs import load_run
from hubkit.runs.eval_results import (
    Contamination,
    Sample,
    load_eval,
)
from hubkit.runs.manifest import DatasetInfo, Manifest, Tracker
from hubkit.runs.model import Metrics, Run

REPO_ROOT = Path(__file__).resolve().parents[2]
LICENSED_REVISION = "card-licence"  # a branch of the tiny base whose README states a custom licence
BASE_README = """---
license: other
license_name: qwen-research
license_link: LICENSE
---

# A tiny base model
"""
GSM8K = DatasetInfo(
    id="openai/gsm8k",
    config="main",
    split="train",
    revision="e53f048856ff4f594e959d75785d2c2d37b678ee",
    filter="prompt <= 256 tokens after the chat template",
    num_rows=7473,
    content_sha256="3f" * 32,
)
TRAIN_HASHES = [f"{i:064x}" for i in range(5)]
PROBLEMS = [
    "What is 2 + 3?",
    "What is 7 * 6?",
    "Tom has 3 apples and buys 4 more. How many?",
    "What is 10 - 4?",
]
REFERENCES = ["5", "42", "7", "6"]


def _python_blocks(card: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)\n```$", card, flags=re.DOTALL | re.MULTILINE)


def _g(value: float) -> str:
    """How a metric value reads in a card: an integer as such, else 4 significant digits."""
    return str(int(value)) if float(value).is_integer() else f"{value:.4g}"


def _write_eval(run_dir: Path, run_id: str, steps: tuple[int, ...]) -> None:
    """An evaluation of the base and `steps` on four problems: the base gets problem 0 wrong, every step right."""
    samples = []
    for step in (None, *steps):
        name = "base" if step is None else f"global_step_{step}"
        for index, (problem, reference) in enumerate(zip(PROBLEMS, REFERENCES, strict=True)):
            wrong = step is None and index == 0
            tokens = 40 - index if step is None else 20 + index
            answer = f"<reasoning>\nstep {step} thinks\n</reasoning>\n<answer>\n{'9' if wrong else reference}\n</answer>"
            samples.append(Sample(name, step, index, problem, reference, answer, not wrong, tokens, False))
    write_eval(
        run_dir,
        samples,
        run_id=run_id,
        problems={"n": len(PROBLEMS), "contamination": Contamination(True, 0, len(TRAIN_HASHES))},
        generation={"system_prompt": gsm8k.SYSTEM_PROMPT},
    )


@pytest.fixture(scope="session")
def licensed_base(hub_api, tiny_qwen3) -> str:
    """A branch of the tiny base whose card states `license: other` / `qwen-research` with a relative link."""
    hub_api.create_branch(tiny_qwen3.repo_id, branch=LICENSED_REVISION, exist_ok=True)
    hub_api.upload_file(
        path_or_fileobj=BASE_README.encode(),
        path_in_repo="README.md",
        repo_id=tiny_qwen3.repo_id,
        revision=LICENSED_REVISION,
    )
    return LICENSED_REVISION


@pytest.fixture(scope="session")
def trl_card_run(tmp_path_factory, trl_run_dir: Path, licensed_base: str) -> Path:
    """The tiny TRL run as a recipe records it: GSM8K data, the seed's reward and system prompt, a tracker,
    training-problem hashes, the base pinned at the licensed revision, and an evaluation of steps 1 and 3."""
    run_dir = tmp_path_factory.mktemp("card-runs") / trl_run_dir.name
    shutil.copytree(trl_run_dir, run_dir)
    manifest = Manifest.load(run_dir)
    manifest.with_updates(
        base_model_revision=licensed_base,
        dataset=GSM8K,
        reward=gsm8k_seed(),
        system_prompt=gsm8k.SYSTEM_PROMPT,
        trackers=(
            Tracker("wandb", "https://wandb.ai/hubkit/tiny-trl"),
            Tracker("trackio", "https://me-trackio.hf.space?project=tiny-trl"),
        ),
    ).save(run_dir)
    (run_dir / "train_problems.sha256").write_text("".join(h + "\n" for h in TRAIN_HASHES))
    _write_eval(run_dir, manifest.run_id, (1, 3))
    return run_dir


def _inputs(run_dir: Path, endpoint: str, **changes) -> CardInputs:
    run = load_run(run_dir)
    manifest = run.manifest
    base = read_base_model_card(manifest.base_model, manifest.base_model_revision, endpoint=endpoint)
    defaults = {
        "run": run,
        "repo_id": "hubkit-test/tiny-trl-card",
        "steps": tuple(c.step for c in run.checkpoints),
        "base": base,
        "adapter_bytes": {c.step: 10_000 + c.step for c in run.checkpoints},
        "has_tokenizer": True,
        "merged_repo_id": "hubkit-test/tiny-trl-card-merged",
        "merged_step": run.checkpoints[-1].step,
        "eval": load_eval(run_dir),
    }
    return CardInputs(**(defaults | changes))


@pytest.fixture(scope="session")
def trl_card(trl_card_run: Path, local_hub) -> tuple[CardInputs, dict[str, bytes]]:
    inputs = _inputs(trl_card_run, local_hub.endpoint)
    return inputs, adapter_card_files(inputs)


# --- the adapter card holds the run's values ----------------------------------------------------------


def test_trl_card_metadata_comes_from_the_run_the_base_card_and_the_eval(trl_card, tiny_qwen3, local_hub):
    from huggingface_hub import ModelCard

    inputs, files = trl_card
    card = ModelCard(files["README.md"].decode())
    data = card.data
    assert data.base_model == tiny_qwen3.repo_id
    assert data.base_model_relation == "adapter" and data.library_name == "peft"
    assert (data.license, data.license_name) == ("other", "qwen-research")
    # The base card's relative link, made absolute to the base repo at the pinned revision.
    assert data.license_link == f"{local_hub.endpoint}/{tiny_qwen3.repo_id}/blob/{LICENSED_REVISION}/LICENSE"
    assert data.datasets == ["openai/gsm8k"]
    assert {"trl", "grpo", "lora", "math"} <= set(data.tags) and "gdpo" not in data.tags
    # The trackio dashboard, embedded in the Hub's Training metrics tab as transformers tags it.
    assert {"trackio", "trackio:https://me-trackio.hf.space?project=tiny-trl"} <= set(data.tags)
    # model-index: the root adapter's (step 3) accuracy on the eval's problems.
    (result,) = data.eval_results
    step3 = inputs.eval.by_step(3)
    assert (result.metric_type, result.metric_value) == ("accuracy", round(step3.accuracy, 4))
    assert (result.dataset_type, result.dataset_split) == ("openai/gsm8k", "test")
    card.validate()  # the local Hub's /api/validate-yaml


def test_trl_card_sections_hold_the_runs_values(trl_card, trl_card_run: Path):
    import trl

    _, files = trl_card
    card = files["README.md"].decode()
    run = load_run(trl_card_run)
    spec = run.manifest.reward
    # Objective and progress.
    assert "GRPO (TRL" in card and "on [openai/gsm8k](https://huggingface.co/datasets/openai/gsm8k)" in card
    assert "Training finished at step 3 of 3." in card
    # Reward: formula, components with weights, aggregation by name and meaning.
    assert spec.formula() in card
    assert f"| `gsm8k_correctness` | 1.0 | – | {gsm8k.CORRECTNESS_SCORE:g} when" in card
    assert "Aggregation: `sum_then_normalize` (unbiased std, ε = 0.0001). GRPO on the combined reward" in card
    # Configuration: every hyperparameter, LoRA, framework version, hardware, wall time.
    for name, value in run.manifest.hyperparameters.items():
        assert f"| `{name}` | {value} |" in card
    assert f"| framework | TRL {trl.__version__} |" in card
    assert "| LoRA rank r | 8 |" in card and "| LoRA alpha | 16 |" in card
    assert "| hardware | 1 × cpu, 1 node |" in card and "| wall time | " in card
    # Dataset: revision, filter, rows, hash, system prompt, contamination from the recorded hashes and the eval.
    assert f"| revision | `{GSM8K.revision}` |" in card and f"| filter | {GSM8K.filter} |" in card
    assert "| rows | 7,473 |" in card and f"| content sha256 | `{GSM8K.content_sha256}` |" in card
    assert "```text\n" + gsm8k.SYSTEM_PROMPT.rstrip("\n") + "\n```" in card
    assert f"all {len(TRAIN_HASHES)} training problems" in card
    assert "4 evaluation problems (`openai/gsm8k`, test split) were checked against them: 0 overlap" in card
    # Run details and citations.
    assert "| run id | `tiny-qwen3-trl-grpo` |" in card and "<https://wandb.ai/hubkit/tiny-trl>" in card
    assert "papers/2402.03300" in card and "2601.05242" not in card
    assert "papers/2110.14168" in card  # GSM8K


def test_trl_card_metrics_at_the_first_middle_and_last_step_and_per_checkpoint(trl_card, trl_card_run: Path):
    inputs, files = trl_card
    card = files["README.md"].decode()
    metrics = load_run(trl_card_run).metrics
    steps = [row.step for row in metrics.rows]
    first, middle, last = steps[0], steps[(len(steps) - 1) // 2], steps[-1]
    assert f"| metric | logged as | step {first} | step {middle} | step {last} |" in card
    for label, name in [
        ("reward (mean)", "reward"),
        ("response length, mean (tokens)", "completions/mean_length"),
        ("gradient norm", "grad_norm"),
        ("entropy", "entropy"),
        ("reward: even_token_reward (mean)", "rewards/even_token_reward/mean"),
    ]:
        values = dict(metrics.series(name))
        cells = " | ".join(_g(values[s]) for s in (first, middle, last))
        assert f"| {label} | `{name}` | {cells} |" in card
    # beta = 0: TRL logs no KL, so the card has no KL row or column (not a row of zeros).
    assert "kl" not in metrics.names and "KL to the reference" not in card and "| KL |" not in card
    # The checkpoint table: subfolder, branch, size, metrics at that step, eval where evaluated (not step 2).
    reward = dict(metrics.series("reward"))
    length = dict(metrics.series("completions/mean_length"))
    for step in (1, 2, 3):
        size = f"{(10_000 + step) / 1000:.1f} KB"
        row = f"| {step} | `checkpoints/global_step_{step}` | `step-{step}` | {size} | {_g(reward[step])} |"
        assert row in card
    step3 = inputs.eval.by_step(3)
    assert f"| {_g(length[3])} | {100 * step3.accuracy:.1f} % | {_g(step3.tokens_mean)} |" in card
    assert f"| {_g(length[2])} | – | – |" in card


def test_trl_card_eval_table_and_before_after_answers_come_from_the_samples(trl_card):
    inputs, files = trl_card
    card = files["README.md"].decode()
    base = inputs.eval.by_step(None)
    assert f"| base model | {100 * base.accuracy:.1f} % |" in card and f"| {base.correct}/{base.n} |" in card
    assert "![Accuracy vs. answer length](assets/accuracy_vs_length.png)" in card
    # The first pair is the problem the checkpoint fixed: problem 0, base answered 9.
    before, after = inputs.eval.before_after(3)[0]
    assert before.problem_index == 0 and not before.correct and after.correct
    assert "### Problem 1 (reference answer: `5`)" in card
    assert f"Base model (wrong, {before.tokens} tokens):\n\n```\n{before.answer}\n```" in card
    assert f"Step 3 (correct, {after.tokens} tokens):\n\n```\n{after.answer}\n```" in card
    # Beside the pair, every evaluated model's answer to that problem (the eval holds steps 1 and 3).
    table = card.split(f"{after.answer}\n```\n\nEvery evaluated model on this problem:\n\n", 1)[1].split(
        "\n\n"
    )[0]
    rows = [line for line in table.splitlines() if line.startswith("|")][2:]
    models = [row.split(" | ")[0].strip("| ") for row in rows]
    assert models == ["base", "step 1", "step 3"]
    step1 = next(s for s in inputs.eval.samples_of(1) if s.problem_index == 0)
    assert f"| step 1 | {step1.tokens:,} | {'correct' if step1.correct else 'wrong'}" in table


def test_a_run_still_training_says_which_step_of_how_many(trl_card_run: Path, local_hub):
    run = load_run(trl_card_run)
    manifest = run.manifest.with_updates(finished_at=None, hyperparameters={"max_steps": 10})
    inputs = _inputs(trl_card_run, local_hub.endpoint, run=replace(run, manifest=manifest, finished=False))
    card = adapter_card_files(inputs)["README.md"].decode()
    assert "**Training is still running**: this card was written at step 3 of 10" in card


# --- the same rows from verl's metric names --------------------------------------------------------


def _metrics_run(tmp_path: Path, framework: str, rows: list[dict[str, float]]) -> Run:
    manifest = Manifest(run_id=f"{framework}-run", framework=framework, base_model="hubkit-test/tiny-qwen3")
    metrics = Metrics.from_entries([(step, values) for step, values in enumerate(rows, start=1)])
    return Run(tmp_path, manifest, (), (), metrics, finished=True)


def test_trl_and_verl_names_map_to_the_same_rows_and_unlogged_metrics_are_left_out(tmp_path: Path):
    trl_rows = [
        {"reward": 0.1 * s, "completions/mean_length": 100.0 + s, "loss": 0.5, "grad_norm": 1.0 + s}
        for s in range(3)
    ]
    verl_rows = [
        {"critic/score/mean": 0.1 * s, "response_length/mean": 100.0 + s, "actor/pg_loss": 0.5}
        | {"actor/grad_norm": 1.0 + s, "timing_s/step": 9.0}
        for s in range(3)
    ]
    trl = key_metric_series(_metrics_run(tmp_path, "trl", trl_rows))
    verl = key_metric_series(_metrics_run(tmp_path, "verl", verl_rows))
    assert [(s.key, s.points) for s in trl] == [(s.key, s.points) for s in verl]
    assert [s.key for s in verl] == ["reward", "length_mean", "policy_loss", "grad_norm"]
    assert [s.logged_as for s in verl] == [
        "critic/score/mean",
        "response_length/mean",
        "actor/pg_loss",
        "actor/grad_norm",
    ]
    charts = plots.training_charts(verl, published_steps=(2,))
    assert [c.path for c in charts] == [
        "assets/reward.png",
        "assets/response_length.png",
        "assets/grad_norm.png",
    ]


@pytest.fixture(scope="session")
def verl_card_run(tmp_path_factory, verl_run_dir: Path) -> Path:
    """The tiny verl run with a GDPO length-penalty reward on a local problem file."""
    run_dir = tmp_path_factory.mktemp("card-runs") / verl_run_dir.name
    shutil.copytree(verl_run_dir, run_dir, ignore=shutil.ignore_patterns("optim_*", "extra_state_*"))
    Manifest.load(run_dir).with_updates(
        reward=deepscaler_length_penalty(0.5, 64, "normalize_then_sum"),
        dataset=DatasetInfo(id="deepscaler_mini.parquet", num_rows=40, filter="solve rate >= 99%"),
    ).save(run_dir)
    return run_dir


@pytest.mark.verl
def test_verl_card_shows_verls_metrics_gdpo_and_a_local_dataset(verl_card_run: Path, local_hub, caplog):
    from huggingface_hub import ModelCard

    with caplog.at_level(logging.WARNING, logger="hubkit.cards.base_card"):
        inputs = _inputs(verl_card_run, local_hub.endpoint, merged_repo_id=None, merged_step=None)
    assert "states no licence" in caplog.text or "has no model card" in caplog.text
    files = adapter_card_files(inputs)
    card = files["README.md"].decode()
    data = ModelCard(card).data
    assert data.license is None and data.datasets is None
    assert {"verl", "gdpo", "math"} <= set(data.tags)
    run = inputs.run
    assert run.manifest.reward.formula() in card and "Aggregation: `normalize_then_sum`" in card
    assert "papers/2601.05242" in card and "a local problem file (`deepscaler_mini.parquet`)" in card
    steps = [row.step for row in run.metrics.rows]
    for name in ("critic/score/mean", "actor/pg_loss", "actor/grad_norm", "response_length/mean"):
        values = dict(run.metrics.series(name))
        assert f"| `{name}` | {_g(values[steps[0]])} |" in card
    assert (
        "logs the normalized sum" in card
        and "| `length_penalty` | 0.5 | max_completion_length = 64 |" in card
    )
    for step in inputs.steps:
        assert f"| {step} | `checkpoints/global_step_{step}` |" in card
    assert "assets/reward.png" in files and "assets/kl.png" not in files  # the tiny run logs no KL
    ModelCard(card).validate()


# --- images -------------------------------------------------------------------------------------------


def _has_color(image, hex_color: str, tolerance: int = 40) -> bool:
    target = tuple(int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    return any(
        sum(abs(a - b) for a, b in zip(pixel[:3], target, strict=True)) <= tolerance
        for _, pixel in image.getcolors(maxcolors=1 << 20)
    )


def test_images_are_pngs_with_one_curve_per_logged_metric(trl_card, trl_card_run: Path):
    from PIL import Image

    inputs, files = trl_card
    run = load_run(trl_card_run)
    series = key_metric_series(run)
    charts = plots.training_charts(series, inputs.steps)
    logged = {s.logged_as: s.points for s in series}
    drawn = {"reward", "length_mean", "length_max", "kl", "entropy", "grad_norm"}
    expected_curves = sorted(s.logged_as for s in series if s.key in drawn or s.key.startswith("component:"))
    assert (
        sorted(c.label.rsplit("[", 1)[1].rstrip("]") for chart in charts for c in chart.curves)
        == expected_curves
    )
    for chart in charts:
        for curve in chart.curves:
            assert curve.points == logged[curve.label.rsplit("[", 1)[1].rstrip("]")]
        data = files[chart.path]
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
        image = Image.open(io.BytesIO(data))
        image.verify()
        image = Image.open(io.BytesIO(data)).convert("RGB")
        assert image.size == (700, 360)
        for color in plots.CURVE_COLORS[: len(chart.curves)]:
            assert _has_color(image, color), f"{chart.path}: no curve drawn in {color}"
    assert files[f"{plots.ASSETS_DIR}/accuracy_vs_length.png"].startswith(b"\x89PNG")
    # Rendering again gives the same bytes: a push with nothing new uploads nothing.
    assert adapter_card_files(inputs) == files


def test_charts_are_drawn_once_per_content_and_carry_no_metadata(trl_card, trl_card_run: Path, monkeypatch):
    inputs, files = trl_card
    drawn_here = []
    draw = plots.training_figure

    def counted(chart):
        drawn_here.append(chart.path)
        return draw(chart)

    monkeypatch.setattr(plots, "training_figure", counted)
    assert adapter_card_files(inputs) == files
    assert drawn_here == []  # kept under the hash of what they show: an unchanged push draws nothing
    fewer = replace(inputs, steps=inputs.steps[:-1])  # other checkpoints marked: every chart drawn again
    adapter_card_files(fewer)
    assert sorted(drawn_here) == sorted(p for p in files if p.startswith("assets/") and "accuracy" not in p)
    for path, data in files.items():
        if path.endswith(".png"):
            chunks = _png_chunk_types(data)
            assert not {b"tEXt", b"iTXt", b"zTXt", b"tIME"} & set(chunks), (path, chunks)


def _png_chunk_types(data: bytes) -> list[bytes]:
    types, at = [], 8
    while at < len(data):
        length = int.from_bytes(data[at : at + 4], "big")
        types.append(data[at + 4 : at + 8])
        at += 12 + length
    return types


def test_nothing_covers_the_data_and_no_label_leaves_the_image(trl_card) -> None:
    from hubkit.runs.eval_results import EvalSummary

    inputs, _ = trl_card
    chart = plots.training_charts(key_metric_series(inputs.run), inputs.steps)[0]
    long_label = plots.Curve(
        "a metric with a name far longer than any legend column " * 3, ((1, 0.5), (2, 0.6))
    )
    summary: EvalSummary = inputs.eval.summary
    for figure in (
        plots.training_figure(replace(chart, curves=(*chart.curves, long_label))),
        plots.accuracy_figure(summary),
    ):
        figure.draw_without_rendering()
        renderer = figure.canvas.get_renderer()
        image = figure.bbox
        axes = figure.axes[0].get_window_extent(renderer)
        for legend in figure.legends:
            box = legend.get_window_extent(renderer)
            assert not box.overlaps(axes), "the legend covers the plot"
            assert image.x0 <= box.x0 and box.x1 <= image.x1 and image.y0 <= box.y0, (
                "the legend leaves the image"
            )
        for text in figure.axes[0].texts:  # point labels
            box = text.get_window_extent(renderer)
            assert axes.x0 <= box.x0 and box.x1 <= axes.x1 and axes.y0 <= box.y0 and box.y1 <= axes.y1, text


# --- base model card ------------------------------------------------------------------------------------


def test_a_base_without_a_card_gives_no_licence_and_a_warning(tiny_qwen3, local_hub, caplog):
    with caplog.at_level(logging.WARNING, logger="hubkit.cards.base_card"):
        base = read_base_model_card(tiny_qwen3.repo_id, endpoint=local_hub.endpoint)
    assert base == BaseModelCard(repo_id=tiny_qwen3.repo_id)
    assert f"{tiny_qwen3.repo_id} has no model card" in caplog.text
    with pytest.raises(RepoNotFoundError, match="is not on"):
        read_base_model_card("hubkit-test/no-such-base", endpoint=local_hub.endpoint)


def test_a_run_with_only_a_manifest_gets_a_card_that_says_what_is_missing(tmp_path: Path):
    manifest = Manifest(run_id="run", framework="trl", base_model="Qwen/Qwen2.5-3B-Instruct", dataset=GSM8K)
    run = Run(tmp_path, manifest, (), (), Metrics(), finished=False)
    inputs = CardInputs(
        run=run,
        repo_id="me/adapter",
        steps=(40, 20),
        base=BaseModelCard(repo_id=manifest.base_model),
        merged_repo_id="me/adapter-merged",
        merged_step=40,
    )
    files = adapter_card_files(inputs)
    assert list(files) == ["README.md"]  # nothing logged: no curves
    adapter = files["README.md"].decode()
    record = MergeRecord("me/adapter", 40, "a" * 64, "b" * 64, manifest.base_model, None, "bfloat16", 7)
    merged = merged_card_files(inputs, record)["README.md"].decode()
    for card in (adapter, merged):
        front = yaml.safe_load(card.split("---\n")[1])
        assert front["datasets"] == ["openai/gsm8k"] and "license" not in front
        assert "states no licence, so this card states none" in card
    assert (
        "| 20 | `checkpoints/global_step_20` | `step-20` | – |" in adapter
        and "The run logged no training metrics." in adapter
    )
    assert (
        "this card was written at step 40 and is refreshed by each push" in adapter
    )  # no max_steps recorded
    assert "has not been evaluated yet" in adapter
    # Nothing says how it was trained: no algorithm claimed, so no reward section nor GRPO's paper.
    assert "| algorithm | not recorded | not recorded by the run |" in adapter
    assert "## Reward" not in adapter and "GRPO" not in adapter and "grpo" not in front["tags"]
    assert "base model's dtype (bfloat16); 7 modules were merged" in merged and "global_step_20" not in merged
    local = replace(run, manifest=manifest.with_updates(dataset=DatasetInfo(id="gsm8k_mini.jsonl")))
    card = adapter_card_files(replace(inputs, run=local))["README.md"].decode()
    assert "a local problem file (`gsm8k_mini.jsonl`)" in card and "huggingface.co/datasets" not in card
    assert "datasets" not in yaml.safe_load(card.split("---\n")[1])


# --- published: snippets run, the reward comes back -------------------------------------------------------


def _run_snippet(code: str, namespace: dict | None = None) -> dict:
    """Run a card's snippet as a user pastes it (after `namespace`'s snippet, for one that follows another)."""
    namespace = {} if namespace is None else dict(namespace)
    exec(compile(code, "<card snippet>", "exec"), namespace)
    return namespace


@pytest.mark.slow
def test_published_card_snippets_load_the_adapter_and_the_merged_model(
    trl_card_run: Path, local_hub, hub_api, make_repo_id, capsys
):
    import torch
    from huggingface_hub import ModelCard
    from peft import PeftModel
    from safetensors.torch import load_file

    repo_id = make_repo_id("adapter")
    argv = [
        "push",
        "--run-dir",
        str(trl_card_run),
        "--repo-id",
        repo_id,
        "--endpoint",
        local_hub.endpoint,
        "--quiet",
    ]
    assert run_cli(argv) == 0
    # The push published the card, its images, the eval and the training-problem hashes.
    card = Path(hub_api.hf_hub_download(repo_id, "README.md")).read_text()
    ModelCard(card).validate()
    published = set(hub_api.list_repo_files(repo_id))
    assert {"assets/reward.png", "assets/accuracy_vs_length.png", "train_problems.sha256"} <= published
    merged_id = f"{repo_id}-merged"
    assert f"[{merged_id}](https://huggingface.co/{merged_id})" in card
    checkpoint, revision, root, merged, vllm = _python_blocks(card)
    capsys.readouterr()
    loaded = _run_snippet(checkpoint)
    assert capsys.readouterr().out.strip() != ""  # the snippet generated and printed an answer
    model = loaded["model"]
    assert isinstance(model, PeftModel)
    saved = load_file(trl_card_run / "checkpoints" / "checkpoint-3" / "adapter_model.safetensors")
    state = model.state_dict()
    for key, tensor in saved.items():
        torch.testing.assert_close(state[key.replace(".weight", ".default.weight")], tensor, rtol=0, atol=0)
    # The branch line, pasted after the checkpoint's snippet (it reuses its base), loads the same adapter.
    by_revision = _run_snippet(revision, {"base": loaded["base"], "PeftModel": PeftModel})["model"]
    branch_state = by_revision.state_dict()
    for key, tensor in saved.items():
        torch.testing.assert_close(
            branch_state[key.replace(".weight", ".default.weight")], tensor, rtol=0, atol=0
        )
    adapter_model = _run_snippet(root)["model"].eval()
    merged_model = _run_snippet(merged)["model"].eval()
    assert not isinstance(merged_model, PeftModel)
    input_ids = torch.tensor([[1, 5, 9, 42, 7, 3]])
    with torch.no_grad():
        expected = adapter_model(input_ids).logits
        got = merged_model(input_ids).logits
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)  # fp32 merge vs. unmerged LoRA
    # vLLM is not installed here: the snippet is valid Python whose download is an adapter folder (what
    # vLLM's loader takes), the newest step's.
    ast.parse(vllm)
    assert f'snapshot_download("{repo_id}", revision="step-3")' in vllm
    assert 'LoRARequest("global_step_3", 1, local_dir)' in vllm
    branch_dir = Path(snapshot_download(repo_id, revision="step-3"))
    assert {"adapter_config.json", "adapter_model.safetensors"} <= {p.name for p in branch_dir.iterdir()}
    assert load_file(branch_dir / "adapter_model.safetensors").keys() == saved.keys()
    tgi = re.search(r"^```bash\n(.*?)\n```$", card, flags=re.DOTALL | re.MULTILINE).group(1)
    assert f"--lora-adapters {repo_id}@step-3" in tgi

    merged_card = Path(hub_api.hf_hub_download(merged_id, "README.md")).read_text()
    ModelCard(merged_card).validate()
    data = ModelCard(merged_card).data
    assert (data.base_model_relation, data.license_name) == ("finetune", "qwen-research")
    assert "14 modules were merged" in merged_card  # 7 target modules x 2 layers
    (merged_snippet,) = _python_blocks(merged_card)
    assert merged_snippet == merged


@pytest.mark.slow
def test_the_reward_travels_with_the_published_model(
    trl_card_run: Path, local_hub, hub_api, make_repo_id, capsys
):
    repo_id = make_repo_id("reward")
    argv = push_argv(trl_card_run, repo_id, local_hub.endpoint)
    assert run_cli([*argv, "--quiet", "--no-merged"]) == 0
    spec = Manifest.load(trl_card_run).reward
    assert read_release_reward(repo_id, endpoint=local_hub.endpoint) == spec
    capsys.readouterr()
    assert run_cli(["reward", "show", repo_id, "--endpoint", local_hub.endpoint]) == 0
    out = capsys.readouterr().out
    assert spec.formula() in out and "gsm8k_strict_format" in out
    assert run_cli(["reward", "show", repo_id, "--json", "--endpoint", local_hub.endpoint]) == 0
    assert RewardSpec.from_dict(json.loads(capsys.readouterr().out)) == spec

    newer = json.loads(Path(hub_api.hf_hub_download(repo_id, "hubkit.json")).read_text()) | {
        "schema_version": 99
    }
    hub_api.upload_file(
        path_or_fileobj=json.dumps(newer).encode(), path_in_repo="hubkit.json", repo_id=repo_id
    )
    with pytest.raises(ReleaseError, match=r"has schema 99, newer than this hubkit .*: upgrade hubkit"):
        read_release_reward(repo_id, endpoint=local_hub.endpoint)
    with pytest.raises(ReleaseError, match=r"has no hubkit\.json"):
        read_release_reward(
            repo_id, endpoint=local_hub.endpoint, revision=hub_api.list_repo_commits(repo_id)[-1].commit_id
        )


def test_hubkit_card_renders_every_card_and_image_for_preview(trl_card_run: Path, local_hub, tmp_path: Path):
    out = tmp_path / "preview"
    argv = ["card", "--run-dir", str(trl_card_run), "--repo-id", "me/tiny", "--out", str(out)]
    assert run_cli([*argv, "--endpoint", local_hub.endpoint, "--quiet"]) == 0
    written = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    assert {"README.md", "assets/reward.png", "assets/accuracy_vs_length.png", "merged/README.md"} <= written
    card = (out / "README.md").read_text()
    sizes = [
        sum(
            (trl_card_run / "checkpoints" / f"checkpoint-{s}" / n).stat().st_size
            for n in ("adapter_model.safetensors", "adapter_config.json")
        )
        for s in (1, 2, 3)
    ]
    assert f"| 1 | `checkpoints/global_step_1` | `step-1` | {sizes[0] / 1000:.1f} KB |" in card
    merged = (out / "merged" / "README.md").read_text()
    assert "# me/tiny-merged" in merged and "14 modules were merged" in merged  # 7 targets x 2 layers


# --- the wheel ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_wheel_ships_the_templates_and_renders_from_them(tmp_path: Path):
    source = tmp_path / "source"
    listed = (
        subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=REPO_ROOT,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, listed):
        top = name.split("/")[0]
        if (REPO_ROOT / name).is_file() and (
            "/" not in name or top in ("hubkit", "model_cards", "spaces", "recipes")
        ):
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO_ROOT / name, source / name)
    wheels = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(source)], check=True
    )
    (wheel,) = wheels.glob("hubkit-*.whl")
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    assert {"hubkit/_model_cards/adapter.md.j2", "hubkit/_model_cards/merged.md.j2"} <= set(names)

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    subprocess.run(
        [*pip, "--python", str(venv / "bin" / "python"), "install", "--no-deps", "--no-index", str(wheel)],
        check=True,
    )
    script = textwrap.dedent(
        """
        import hubkit, sys
        from pathlib import Path
        from hubkit.cards import BaseModelCard, CardInputs, adapter_card_files
        from hubkit.runs.manifest import Manifest
        from hubkit.resources import model_cards_dir
        from hubkit.runs.model import Metrics, Run

        assert "site-packages" in hubkit.__file__ and Path(sys.prefix).name == "venv", hubkit.__file__
        assert model_cards_dir() == Path(hubkit.__file__).parent / "_model_cards", model_cards_dir()
        manifest = Manifest(run_id="run", framework="verl", base_model="Qwen/Qwen3-4B")
        run = Run(Path.cwd(), manifest, (), (), Metrics.from_entries([(5, {"critic/score/mean": 0.25})]), True)
        inputs = CardInputs(run=run, repo_id="me/wheel", steps=(5,), base=BaseModelCard("Qwen/Qwen3-4B"))
        files = adapter_card_files(inputs)
        assert files["assets/reward.png"].startswith(b"\\x89PNG"), sorted(files)
        print(files["README.md"].decode())
        """
    )
    site = next((REPO_ROOT / ".venv" / "lib").glob("python3*/site-packages"))
    result = subprocess.run(
        [str(venv / "bin" / "python"), "-c", script],
        cwd=tmp_path,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert (
        "# me/wheel" in result.stdout
        and "| 5 | `checkpoints/global_step_5` | `step-5` | – | 0.25 |" in result.stdout
    )
