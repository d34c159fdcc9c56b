"""Rendering a run's cards into a local folder, as a push would publish them (`hubkit card`).

A preview reads what a push computes from the run's own files instead: adapter sizes from the saved
adapters, and for the merged card the number of adapted modules and the base config's dtype.
"""

from __future__ import annotations

import json
from pathlib import Path

from hubkit.cards.base_card import read_base_model_card
from hubkit.cards.files import adapter_card_files, merged_card_files
from hubkit.cards.inputs import CardInputs
from hubkit.cards.merge_record import MergeRecord
from hubkit.errors import CheckpointError, HubkitError, PublishError
from hubkit.evaluate.results import load_eval
from hubkit.formats.peft import (
    ADAPTER_CONFIG,
    ADAPTER_FILES,
    ADAPTER_WEIGHTS,
    parse_lora_key,
    read_weights_header,
)
from hubkit.hub.download import download_repo_file
from hubkit.hub.hashing import hash_file
from hubkit.runs.model import Checkpoint, Run

MERGED_DIR = "merged"


def adapter_sizes(run: Run) -> dict[int, int]:
    """Bytes of each complete checkpoint's saved adapter (weights + config); steps without one are left out."""
    sizes = {}
    for checkpoint in run.checkpoints:
        adapter_dir = checkpoint.adapter_dir
        if adapter_dir is not None and all((adapter_dir / name).is_file() for name in ADAPTER_FILES):
            sizes[checkpoint.step] = sum((adapter_dir / name).stat().st_size for name in ADAPTER_FILES)
    return sizes


def adapted_modules(checkpoint: Checkpoint) -> int | None:
    """How many modules the checkpoint's saved adapter adapts, or None when it saved no readable adapter."""
    if checkpoint.adapter_dir is None:
        return None
    try:
        header = read_weights_header(checkpoint.adapter_dir, checkpoint.name)
    except HubkitError:
        return None
    modules = {parsed[0] for t in header.tensors if (parsed := parse_lora_key(t.name)) is not None}
    return len(modules) or None


def base_dtype(base_model: str, revision: str | None, *, endpoint: str | None, token: str | None) -> str:
    """The dtype the base config names (``dtype``, or the older ``torch_dtype``); ``float32`` when it names none."""
    path = download_repo_file(base_model, "config.json", revision=revision, endpoint=endpoint, token=token)
    if path is None:
        raise PublishError(f"base model {base_model} has no config.json: check the manifest's base_model")
    config = json.loads(path.read_text())
    dtype = config.get("dtype") or config.get("torch_dtype")
    return dtype if isinstance(dtype, str) else "float32"


def render_preview(
    run: Run,
    repo_id: str,
    out_dir: Path,
    *,
    merged_repo_id: str | None,
    endpoint: str | None,
    token: str | None,
    space_repo_id: str | None = None,
) -> list[Path]:
    """Write the adapter card and its images to `out_dir`, the merged card to `out_dir/merged/`.

    Args:
        run: the run.
        repo_id: the adapter repo the card is written for.
        out_dir: the folder to write to (created).
        merged_repo_id: the merged repo, or None for no merged card.
        space_repo_id: the Space the cards link, or None.
        endpoint: the Hub to read the base model's card (and config) from.
        token: for that Hub.

    Returns:
        The files written. The merged card is skipped when the newest checkpoint saved no adapter
        (a push rebuilds it from the FSDP shards first).

    Raises:
        CheckpointError: the run has no complete checkpoint yet.
        PublishError: the base model's card cannot be read from `endpoint`.
    """
    latest = run.latest
    if latest is None:
        raise CheckpointError(f"run {run.manifest.run_id} has no complete checkpoint yet: nothing to preview")
    manifest = run.manifest
    modules = adapted_modules(latest) if merged_repo_id else None
    inputs = CardInputs(
        run=run,
        repo_id=repo_id,
        steps=tuple(c.step for c in run.checkpoints),
        base=read_base_model_card(
            manifest.base_model, manifest.base_model_revision, endpoint=endpoint, token=token
        ),
        adapter_bytes=adapter_sizes(run),
        has_tokenizer=run.tokenizer_dir() is not None,
        merged_repo_id=merged_repo_id if modules else None,
        merged_step=latest.step if modules else None,
        eval=load_eval(run.run_dir),
        space_repo_id=space_repo_id,
    )
    files = {Path(name): data for name, data in adapter_card_files(inputs).items()}
    if modules and latest.adapter_dir is not None:
        # What the push records of its merge, from the saved adapter (a push hashes the adapter it
        # publishes, whose config it rewrites, and the base's commit).
        record = MergeRecord(
            adapter_repo=repo_id,
            step=latest.step,
            adapter_sha256=hash_file(latest.adapter_dir / ADAPTER_WEIGHTS, git_sha1=False).sha256,
            adapter_config_sha256=hash_file(latest.adapter_dir / ADAPTER_CONFIG, git_sha1=False).sha256,
            base_model=manifest.base_model,
            base_revision=manifest.base_model_revision,
            dtype=base_dtype(
                manifest.base_model, manifest.base_model_revision, endpoint=endpoint, token=token
            ),
            merged_modules=modules,
        )
        merged = merged_card_files(inputs, record)
        files |= {Path(MERGED_DIR) / name: data for name, data in merged.items()}
    written = []
    for relative, data in sorted(files.items()):
        path = out_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        written.append(path)
    return written
