"""The files a push publishes for the cards: the adapter repo's README.md and its images under
``assets/``, and the merged repo's README.md. Pure: everything comes from `CardInputs`, nothing is read
from the network, and the same inputs give the same bytes (so a push with nothing new commits nothing)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, replace
from typing import Any

from hubkit.cards import configuration, plots, sections, tables, text, usage
from hubkit.cards.gguf_record import GGUFRecord
from hubkit.cards.inputs import BaseModelCard, CardInputs
from hubkit.cards.merge_record import MergeRecord
from hubkit.cards.metadata import card_data, gguf_card_data
from hubkit.cards.metrics import MetricSeries, key_metric_series
from hubkit.cards.render import render_card
from hubkit.cards.sweep_siblings import siblings_region
from hubkit.cards.usage import snippets
from hubkit.errors import PublishError
from hubkit.formats import gguf_types
from hubkit.release.companions import SAMPLES, SPACE, SWEEP_PAGE
from hubkit.release.layout import SWEEP_CHART
from hubkit.runs.algorithm import run_algorithm
from hubkit.runs.state import CHARTS_DIR

ADAPTER_TEMPLATE = "adapter.md.j2"
MERGED_TEMPLATE = "merged.md.j2"
GGUF_TEMPLATE = "gguf.md.j2"
ACCURACY_PLOT = f"{plots.ASSETS_DIR}/accuracy_vs_length.png"


def license_statement(base: BaseModelCard) -> str:
    """The licence sentence: the base model's, as its card states it, or that it states none."""
    base_link = f"[{base.repo_id}](https://huggingface.co/{base.repo_id})"
    if base.license is None:
        return f"the base model's card ({base_link}) states no licence, so this card states none."
    name = base.license_name or base.license
    shown = f"[{name}]({base.license_link})" if base.license_link else text.code(name)
    return f"{shown}, the licence of the base model {base_link}; its terms apply to this model too."


def _reward_functions(inputs: CardInputs) -> dict[str, Any] | None:
    """The Reward section of a run that logged its reward functions but recorded no reward spec."""
    rows = sections.reward_functions_rows(inputs.run)
    if not rows:
        return None
    settings = inputs.run.trainer_settings
    values = settings.values if settings else {}
    how = [
        f"`{name}` = {text.setting(values[name])}"
        for name in ("multi_objective_aggregation", "scale_rewards")
        if name in values
    ]
    return {
        "table": tables.Table(
            header=("reward function", "weight", "score"), rows=rows, numeric=(False, True, False)
        ),
        "aggregation": ", ".join(how),
    }


def _key_metrics_note(inputs: CardInputs) -> str:
    reward = inputs.run.manifest.reward
    note = ""
    if inputs.run.metrics_source:
        note += f" The metrics were read from the run's {inputs.run.metrics_source}."
    if inputs.run.framework == "verl" and reward and reward.aggregation == "normalize_then_sum":
        note += (
            " With `normalize_then_sum`, verl logs the normalized sum Σ wᵢ·zᵢ as `critic/score/mean`, not the "
            "raw reward."
        )
    return note


def _common_context(inputs: CardInputs) -> dict[str, Any]:
    """What both cards say about the run."""
    run = inputs.run
    manifest = run.manifest
    dataset = manifest.dataset
    return {
        "repo_id": inputs.repo_id,
        "base_model": manifest.base_model,
        "objective": sections.objective(run),
        "progress": sections.progress(run, inputs.steps),
        "license_statement": license_statement(inputs.base),
        "reward_driven": manifest.reward is not None or run_algorithm(run).reward_driven,
        "reward": sections.reward_section(manifest.reward),
        "reward_functions": _reward_functions(inputs),
        "configuration": tables.Table(
            header=("setting", "value", "read from"),
            rows=configuration.configuration_rows(run),
            numeric=(False, False, False),
        ),
        "configuration_note": configuration.SOURCES_NOTE,
        "dataset": (
            tables.Table(header=("dataset", ""), rows=sections.dataset_rows(dataset), numeric=(False, False))
            if dataset is not None
            else None
        ),
        "system_prompt": text.fence(manifest.system_prompt, "text") if manifest.system_prompt else None,
        "contamination": sections.contamination(run, inputs.eval),
        "citations": tuple(
            replace(c, bibtex=text.fence(c.bibtex, "bibtex")) if c.bibtex else c
            for c in sections.citations(run)
        ),
        "merged_repo_id": inputs.merged_repo_id,
        "merged_step": inputs.merged_step,
        "gguf_repo_id": inputs.gguf_repo_id,
        "gguf_step": inputs.gguf_step,
        "space_repo_id": inputs.space_repo_id,
        "space_url": SPACE.url(inputs.space_repo_id) if inputs.space_repo_id else None,
        "qlora": _qlora(inputs),
    }


def _sweep(inputs: CardInputs) -> dict[str, str] | None:
    """The run's sweep for its card: the varied value, the comparison page (its chart is drawn there, so a
    run added to the sweep later shows in every sibling's card at once) and the other runs' repos."""
    sweep = inputs.run.manifest.sweep
    if sweep is None:
        return None
    page = SWEEP_PAGE.sweep_repo_id(inputs.repo_id.split("/")[0], sweep.name)
    return {
        "name": text.prose(sweep.name),
        "point": f"{sweep.setting}={sweep.value}",
        "page": page,
        "page_url": SWEEP_PAGE.url(page),
        "chart": SWEEP_CHART,
        "siblings": siblings_region(sweep.setting, inputs.sweep_siblings),
    }


def _qlora(inputs: CardInputs) -> str | None:
    """What the card says of a run trained on a 4-bit base (QLoRA)."""
    quantized = inputs.run.quantized_base
    if quantized is None:
        return None
    base = inputs.run.manifest.base_model
    if quantized.full_precision is None:
        return (
            f"Trained as QLoRA (4-bit base): the adapters name the quantized base {text.code(quantized.trained_on)}, "
            "which needs bitsandbytes (and a GPU) to load."
        )
    return (
        f"Trained as QLoRA (4-bit base): LoRA was trained on {text.code(quantized.trained_on)}, the 4-bit "
        f"quantization of [{base}](https://huggingface.co/{base}); the adapters are published against {base} "
        "itself, which they fit the same way (answers may differ slightly from those of the quantized model)."
    )


def _evaluation(inputs: CardInputs) -> dict[str, Any] | None:
    evaluation = inputs.eval
    if evaluation is None:
        return None
    summary = evaluation.summary
    problems, generation = summary.problems, summary.generation
    split = f", {problems.split} split" if problems.split else ""
    revision = f" at revision {text.code(problems.revision)}" if problems.revision else ""
    sampling = (
        "greedy decoding"
        if not generation.do_sample
        else f"sampling (temperature {generation.temperature:g}, top-p {generation.top_p:g})"
    )
    if problems.whole and problems.split:
        extent = f"the whole {problems.split} split"
    elif problems.split:
        extent = (
            f"a sample of its {problems.split} split (the first {problems.n} problems with an answer): not the "
            "benchmark's own score, which takes the whole split"
        )
    else:
        extent = "a problem file"
    description = (
        f"{problems.n} held-out problems from {text.code(problems.source)}{split}{revision} ({extent}), scored "
        f"with `{summary.metric.name}` ({text.prose(summary.metric.description)}); {sampling}, at most "
        f"{generation.max_new_tokens} new tokens, {generation.backend} backend, seed {generation.seed}, "
        f"{generation.prompt_description()}. Accuracy intervals are Wilson 95 % intervals."
    )
    return {"description": description, "table": tables.eval_table(evaluation), "plot": ACCURACY_PLOT}


def _usage(inputs: CardInputs) -> dict[str, str | None]:
    """Each snippet as a code block (the TGI one is a shell command)."""
    made = snippets(inputs)
    return {
        name: text.fence(code, "bash" if name == "tgi" else "python") if code else None
        for name, code in asdict(made).items()
        if name != "vllm_note"
    } | {"vllm_note": made.vllm_note}


def adapter_card_files(inputs: CardInputs) -> dict[str, bytes]:
    """The adapter repo's card and its images (drawn once per content: `plots.cached_png`), path in repo →
    bytes: ``README.md``, one ``assets/*.png`` per training chart the run logged, and
    ``assets/accuracy_vs_length.png`` when the run was evaluated."""
    series: tuple[MetricSeries, ...] = key_metric_series(inputs.run)
    charts = plots.training_charts(series, inputs.steps)
    cache = inputs.run.run_dir / CHARTS_DIR
    files = {
        chart.path: plots.cached_png(
            "training", chart, lambda c=chart: plots.png(plots.training_figure(c)), cache
        )
        for chart in charts
    }
    if inputs.eval is not None:
        summary = inputs.eval.summary
        draw = lambda: plots.png(plots.accuracy_figure(summary))  # noqa: E731
        files[ACCURACY_PLOT] = plots.cached_png("accuracy", summary, draw, cache)
    context = {
        **_common_context(inputs),
        "steps": inputs.steps,
        "root_step": inputs.root_step,
        "usage": _usage(inputs),
        "key_metrics": tables.key_metrics_table(series),
        "key_metrics_note": _key_metrics_note(inputs),
        "charts": tuple({"path": c.path, "title": c.title} for c in charts),
        # The Hub's tab for the TensorBoard event file the adapter repo holds (`runs/`).
        "metrics_tab_url": f"https://huggingface.co/{inputs.repo_id}/tensorboard",
        "samples_repo_id": inputs.samples_repo_id,
        "samples_url": SAMPLES.url(inputs.samples_repo_id) if inputs.samples_repo_id else None,
        "sweep": _sweep(inputs),
        "checkpoints": tables.checkpoint_table(inputs, series),
        "evaluation": _evaluation(inputs),
        "examples": tables.before_after(inputs),
        "example_step": tables.example_step(inputs),
        "verified": _verified(inputs.merged_verified),
        "run_details": tables.Table(
            header=("run", ""), rows=sections.run_details(inputs.run, inputs.steps), numeric=(False, False)
        ),
    }
    readme = render_card(card_data(inputs, "adapter"), ADAPTER_TEMPLATE, context)
    return {"README.md": readme.encode(), **files}


def _step_metrics(series: tuple[MetricSeries, ...], step: int) -> tables.Table | None:
    rows = tuple(
        (text.cell(s.label), text.code(s.logged_as), text.number(s.at(step)))
        for s in series
        if s.at(step) is not None
    )
    if not rows:
        return None
    return tables.Table(
        header=("metric", "logged as", f"step {step}"), rows=rows, numeric=(False, False, True)
    )


def merged_card_files(inputs: CardInputs, record: MergeRecord) -> dict[str, bytes]:
    """The merged repo's ``README.md``, with the merge `record` in its metadata (``hubkit_merge``).

    Raises:
        PublishError: `inputs` names no merged repo.
    """
    if inputs.merged_repo_id is None or inputs.merged_step is None:
        raise PublishError(f"no merged repo to write a card for (adapter repo {inputs.repo_id})")
    run, step = inputs.run, inputs.merged_step
    checkpoint = next((c for c in run.checkpoints if c.step == step), None)
    run_tokenizer = checkpoint is not None and run.tokenizer_dir(checkpoint) is not None
    result = tables.result_at(inputs.eval, step)
    merged_eval = (
        f"{text.percent(result.accuracy)} accuracy on {result.n} problems of "
        f"{text.code(inputs.eval.summary.problems.source)}, {text.number(result.tokens_mean)} tokens on average"
        if result is not None and inputs.eval is not None
        else None
    )
    context = {
        **_common_context(inputs),
        "usage": _usage(inputs),
        "dtype": record.dtype,
        "merged_modules": record.merged_modules,
        "tokenizer_source": "the run's own" if run_tokenizer else "the base model's",
        "merged_metrics": _step_metrics(key_metric_series(run), step),
        "merged_eval": merged_eval,
        "verified": _verified(record.verified),
    }
    return {"README.md": render_card(card_data(inputs, "merged", record), MERGED_TEMPLATE, context).encode()}


def _verified(check: Mapping[str, Any] | None) -> dict[str, str] | None:
    """The figures of the merged model's check against its adapter (`hubkit.verify`), as the card says them:
    numbers only (a record read back from the Hub is data, not text to copy)."""
    figures = ("prompts", "tokens", "max_abs_logit_diff", "bound", "top1_agreement", "adapter_effect")
    if check is None or not all(isinstance(check.get(k), int | float) for k in figures):
        return None
    shown = {k: f"{float(check[k]):.3g}" for k in figures}
    shown.update(prompts=str(int(check["prompts"])), tokens=str(int(check["tokens"])))
    shown["agreement"] = text.percent(float(check["top1_agreement"]))
    return shown


def gguf_card_files(inputs: CardInputs, record: GGUFRecord, gguf_repo_id: str) -> dict[str, bytes]:
    """The GGUF repo's card: its files (type, size), usage with llama.cpp, Ollama and llama-cpp-python,
    and what the files were made from, recorded in its metadata (``hubkit_gguf``): ``{"README.md": bytes}``.

    Raises:
        PublishError: `inputs` names no merged repo, or the record no file.
    """
    if inputs.merged_repo_id is None or not record.files:
        raise PublishError(f"no GGUF files to write a card for ({gguf_repo_id})")
    types = sorted(record.files, key=gguf_types.listing_order)
    # What people run on a laptop first, when the repo holds it.
    default = next((t for t in ("Q4_K_M", "Q8_0") if t in record.files), types[0])
    same_bits = record.merge.dtype == "bfloat16"  # a bf16 base (Qwen3-4B's) merges to bf16
    context = {
        **_common_context(inputs),
        "gguf_repo_id": gguf_repo_id,
        "merged_step": record.merge.step,
        "files": [
            {
                "name": record.files[t].name,
                "type": t,
                "size": text.size(record.files[t].size),
                "description": gguf_types.weights_of(t) if t != "BF16" or same_bits else "bfloat16",
            }
            for t in types
        ],
        "bf16_note": (
            "BF16 keeps the merged weights' bits"
            if same_bits
            else f"BF16 rounds the merged {record.merge.dtype} weights to the nearest bfloat16"
        ),
        "default_type": default,
        "k_quants": [t for t in types if gguf_types.made_by_llama_cpp(t)],
        "usage_python": text.fence(
            usage.gguf_python(inputs, gguf_repo_id, record.files[default].name), "python"
        ),
        "lora": _gguf_lora_context(inputs, record, gguf_repo_id, default),
        "verified": _gguf_verified(record, types),
    }
    return {"README.md": render_card(gguf_card_data(inputs, record), GGUF_TEMPLATE, context).encode()}


def _gguf_verified(record: GGUFRecord, types: list[str]) -> dict[str, Any] | None:
    """Each file's check before the push (`hubkit.verify.gguf`), as the card says it: numbers only (a record
    read back from the Hub is data, not text to copy); ``measured`` when llama.cpp ran every file."""
    figures = ("prompts", "tokens", "top1_agreement", "mean_kl")
    rows = []
    for t in types:
        check = record.verified.get(t)
        if not isinstance(check, Mapping) or not isinstance(check.get("prompts"), int):
            return None
        measured = check.get("checked") == "llama.cpp" and all(
            isinstance(check.get(k), int | float) for k in figures
        )
        row = {"name": record.files[t].name, "type": t, "size": text.size(record.files[t].size)}
        row["prompts"], row["measured"] = str(int(check["prompts"])), measured
        if measured:
            row.update(tokens=str(int(check["tokens"])), mean_kl=f"{float(check['mean_kl']):.3g}")
            row["agreement"] = f"{100 * float(check['top1_agreement']):.1f} %"
        rows.append(row)
    return {"rows": rows, "measured": all(r["measured"] for r in rows)}


def _gguf_lora_context(
    inputs: CardInputs, record: GGUFRecord, gguf_repo_id: str, default: str
) -> dict[str, object] | None:
    """The GGUF card's section on running each checkpoint as a GGUF LoRA over the base's file (None when the
    repo holds none): the files, and llama.cpp's, llama-server's, Ollama's and llama-cpp-python's ways."""
    if not record.lora or not record.base:
        return None
    base_type = default if default in record.base else min(record.base, key=gguf_types.listing_order)
    base_file = record.base[base_type].name
    steps = sorted(record.lora)
    newest, other = record.lora[steps[-1]].name, record.lora[steps[-2] if len(steps) > 1 else steps[-1]].name
    return {
        "base_files": [
            {"name": record.base[t].name, "type": t, "size": text.size(record.base[t].size)}
            for t in sorted(record.base, key=gguf_types.listing_order)
        ],
        "steps": [
            {"step": s, "name": record.lora[s].name, "size": text.size(record.lora[s].size)} for s in steps
        ],
        "base_file": base_file,
        "newest_step": steps[-1],
        "newest": newest,
        "other": other,
        "python": text.fence(usage.gguf_lora_python(inputs, gguf_repo_id, base_file, newest), "python"),
    }
