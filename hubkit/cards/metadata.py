"""The cards' metadata (YAML front matter) as huggingface_hub `ModelCardData`: base model and relation,
library, the base's licence, Hub datasets, tags, and ``model-index`` from the evaluation."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from hubkit.cards.gguf_record import METADATA_KEY as GGUF_METADATA_KEY
from hubkit.cards.gguf_record import GGUFRecord
from hubkit.cards.inputs import CardInputs
from hubkit.cards.merge_record import METADATA_KEY, MergeRecord
from hubkit.cards.tables import result_at
from hubkit.release.companions import COMPANIONS
from hubkit.runs.algorithm import run_algorithm
from hubkit.runs.model import Run

if TYPE_CHECKING:
    from huggingface_hub import EvalResult, ModelCardData

# Components that check answers to math problems: their runs are tagged `math`.
_MATH_COMPONENTS = ("math_correctness", "gsm8k_correctness")


_TRACKIO_SPACE_RE = re.compile(
    r"^https://(huggingface\.co/spaces/[\w.-]+/[\w.-]+|[\w-]+\.hf\.space)([/?][^\s]*)?$"
)


def tags(run: Run, *extra: str) -> list[str]:
    """hubkit, lora, the framework, the algorithm (grpo, gdpo, sft...) when the run says it, qlora for a 4-bit base, math when the reward checks math
    answers, and the trackio tags of a dashboard on a Space."""
    manifest = run.manifest
    trained = run_algorithm(run).name
    found = ["hubkit", "lora", *extra, manifest.framework]
    found += [trained.lower().replace(" ", "-")] if trained else []
    if run.quantized_base is not None:
        found.append("qlora")
    reward = manifest.reward
    if reward is not None and any(c.name in _MATH_COMPONENTS for c in reward.components):
        found.append("math")
    # A trackio dashboard on a Space: the tags transformers writes, which embed it in the Training metrics tab.
    for tracker in manifest.trackers:
        if tracker.name == "trackio" and _TRACKIO_SPACE_RE.match(tracker.url):
            found += ["trackio", f"trackio:{tracker.url}"]
    return found


def eval_results(inputs: CardInputs, step: int) -> list[EvalResult] | None:
    """``model-index`` results of the checkpoint at `step` (accuracy on the eval's problems), if evaluated."""
    from huggingface_hub import EvalResult

    evaluation = inputs.eval
    result = result_at(evaluation, step)
    if evaluation is None or result is None:
        return None
    summary = evaluation.summary
    problems = summary.problems
    return [
        EvalResult(
            task_type="text-generation",
            dataset_type=problems.source,
            dataset_name=problems.source,
            dataset_split=problems.split,
            dataset_revision=problems.revision,
            metric_type="accuracy",
            metric_name=f"accuracy ({summary.metric.name})",
            metric_value=round(result.accuracy, 4),
        )
    ]


def card_data(
    inputs: CardInputs, kind: Literal["adapter", "merged"], record: MergeRecord | None = None
) -> ModelCardData:
    """The metadata of the adapter repo's card (``library_name: peft``, ``base_model_relation: adapter``,
    model-index for the root adapter) or the merged repo's (``transformers``, ``finetune``, model-index for
    the merged step, `record` as ``hubkit_merge``)."""
    from huggingface_hub import ModelCardData

    manifest = inputs.run.manifest
    base = inputs.base
    if kind == "adapter":
        repo_id, step, library, relation = inputs.repo_id, inputs.root_step, "peft", "adapter"
        extra_tags: tuple[str, ...] = ("peft",)
    else:
        assert inputs.merged_repo_id is not None and inputs.merged_step is not None  # checked by the caller
        repo_id, step = inputs.merged_repo_id, inputs.merged_step
        library, relation, extra_tags = "transformers", "finetune", ("merged-lora",)
    dataset = manifest.dataset
    results = eval_results(inputs, step)
    return ModelCardData(
        base_model=manifest.base_model,
        base_model_relation=relation,
        library_name=library,
        license=base.license,
        license_name=base.license_name,
        license_link=base.license_link,
        datasets=[dataset.id] if dataset is not None and dataset.on_hub else None,
        pipeline_tag="text-generation",
        tags=tags(inputs.run, *extra_tags),
        model_name=repo_id.split("/")[-1] if results else None,  # model-index needs it; nothing else does
        eval_results=results,
        **({METADATA_KEY: record.to_metadata()} if record is not None else {}),
        **({RELEASE_KEY: links} if kind == "adapter" and (links := release_links(inputs)) else {}),
    )


# The adapter card names the release's other repos here, so that a reader of the release (`hubkit eval
# --repo-id --push`) writes the card again with the same links, whatever the repos were called.
RELEASE_KEY = "hubkit_release"


def release_links(inputs: CardInputs) -> dict[str, str]:
    """The companion repos the adapter card links, by kind (``merged``, ``gguf``, ...), those the release has."""
    links = {c.kind: getattr(inputs, f"{c.kind}_repo_id") for c in COMPANIONS}
    return {kind: repo_id for kind, repo_id in links.items() if repo_id is not None}


def gguf_card_data(inputs: CardInputs, record: GGUFRecord) -> ModelCardData:
    """The GGUF card's metadata: the merged repo as its base (``base_model_relation: quantized``, as the
    Hub lists GGUF repos under the model they were made from), ``library_name: gguf``, the base's licence,
    and what the files hold (``hubkit_gguf``)."""
    from huggingface_hub import ModelCardData

    assert inputs.merged_repo_id is not None  # GGUF files are written from the merged model
    base = inputs.base
    return ModelCardData(
        base_model=inputs.merged_repo_id,
        base_model_relation="quantized",
        library_name="gguf",
        license=base.license,
        license_name=base.license_name,
        license_link=base.license_link,
        pipeline_tag="text-generation",
        tags=tags(inputs.run, "gguf", "llama.cpp"),
        **{GGUF_METADATA_KEY: record.to_metadata()},
    )
