"""PEFT adapter normalization and validation, before anything is uploaded.

`prepare_adapter` turns one checkpoint's adapter (TRL's, verl's ``lora_adapter/``, or one rebuilt from verl's
FSDP shards) into a directory holding exactly ``adapter_config.json`` + ``adapter_model.safetensors`` in PEFT
form, and refuses adapters that would not load or would load as a no-op. `check_against_base` then checks
its module names and shapes against the base model's Linear layers, from the base's ``config.json``
alone (`hubkit.adapters.base_check`; no weights downloaded).

A saved adapter is read once (`hubkit.adapters.weights_read.scan_weights`: every tensor checked, the file
hashed) and only its config is rewritten: the weights file itself is published (linked into the
output directory) unless its keys are not PEFT's or its header is not the one vetting writes (metadata
other than ``format`` dropped), and a later push of the same file reads none of its tensors again (the
run directory remembers the read).

A push vets a saved adapter's files first (`hubkit.safety`, from `hubkit.publish`) and hands the outcome
in as a `PublishedForm`: the config the checks read is then the vetted one (fields naming the model by
its path set to the Hub id, keys PEFT does not read dropped), and weights whose header vetting would
change are published rewritten. Without one (evaluating, merging locally) the saved files are read as
they are.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hubkit.adapters.checks import check_alpha, check_targets, refuse_empty
from hubkit.adapters.weights_read import Verdict, VerdictCache, rewritten_header, scan_weights
from hubkit.errors import AdapterError, CheckpointError
from hubkit.formats.peft import (
    ADAPTER_CONFIG,
    ADAPTER_FILES,
    ADAPTER_WEIGHTS,
    lora_pairs,
    normalize_key,
    parse_lora_key,
    read_adapter_config,
    read_saved_adapter_config,
    read_weights_header,
    unsupported_variant,
    variant_refusal,
)
from hubkit.formats.safetensors import SafetensorsHeader
from hubkit.hub.hashing import FileHashes, FileVersion, hash_file
from hubkit.runs.manifest import LoraSettings
from hubkit.runs.model import Checkpoint, Run

logger = logging.getLogger(__name__)

# Adapters read at once by `prepare_adapters` (at most one per core).
_PREPARE_WORKERS = 4


@dataclass(frozen=True)
class PreparedAdapter:
    """A normalized, validated adapter on disk, ready to upload.

    Args:
        step: the training step it comes from.
        dir: a directory holding exactly ``adapter_config.json`` and ``adapter_model.safetensors``.
        config: the normalized adapter config (as written).
        num_modules: how many modules it adapts (lora_A/lora_B pairs).
        rebuilt: True when it was rebuilt from verl's FSDP shards rather than taken from a saved adapter.
        weights: the hashes of ``dir/adapter_model.safetensors`` (computed while it was checked).
        saved_weights_published: True when that file is the checkpoint's own (linked, not rewritten).
    """

    step: int
    dir: Path
    config: dict[str, Any]
    num_modules: int
    rebuilt: bool
    weights: FileHashes
    saved_weights_published: bool = False

    @property
    def size(self) -> int:
        """Bytes published for this adapter (weights and config)."""
        return sum((self.dir / name).stat().st_size for name in ADAPTER_FILES)


# --- building the normalized adapter --------------------------------------------------------------


def _normalized_config(config: dict[str, Any], run: Run, alpha: float) -> dict[str, Any]:
    """The saved config with what publishing needs: Hub base id and revision, real alpha, CAUSAL_LM."""
    peft_type = config.get("peft_type", "LORA")
    normalized = dict(config)
    normalized.update(
        peft_type=peft_type,
        base_model_name_or_path=run.manifest.base_model,  # never the local path training used
        revision=run.manifest.base_model_revision,
        lora_alpha=alpha,
        task_type="CAUSAL_LM",
        inference_mode=True,
    )
    normalized.pop("runtime_config", None)  # PEFT ignores it on load, with a warning
    if isinstance(normalized.get("target_modules"), set | tuple):
        normalized["target_modules"] = sorted(normalized["target_modules"])
    return normalized


@dataclass(frozen=True)
class PublishedForm:
    """How a saved adapter's files are to be published, as the push decided when it vetted them.

    Args:
        config: the saved ``adapter_config.json`` as vetting wrote it back: the checks read it instead of
            the file. None: the file is read (a missing one is refused by the checks).
        header_kept: the saved weights' header is the one to publish; False: the weights are published
            rewritten, their tensor data unchanged after a header holding only the metadata libraries
            read (`hubkit.formats.safetensors.known_metadata`).
    """

    config: dict[str, Any] | None = None
    header_kept: bool = True


@dataclass(frozen=True)
class _SavedAdapter:
    """A saved adapter whose config and header passed every check; its tensor data is not read yet."""

    weights: Path
    header: SafetensorsHeader
    names: dict[str, str]  # saved tensor name → PEFT name
    config: dict[str, Any]  # normalized
    num_modules: int
    header_kept: bool  # the saved header is the one to publish (see `PublishedForm`)

    @property
    def lora_b(self) -> set[str]:
        return {saved for saved, name in self.names.items() if (parse_lora_key(name) or ("", ""))[1] == "B"}

    @property
    def rewritten(self) -> bool:
        """Whether the published file is a rewrite (new header, same tensor data), not the saved file."""
        return not self.header_kept or any(saved != name for saved, name in self.names.items())


def _checked_saved_adapter(
    adapter_dir: Path, run: Run, lora: LoraSettings | None, label: str, form: PublishedForm
) -> _SavedAdapter:
    """Every check a saved adapter's config and safetensors header allow, before any tensor is read."""
    config = form.config if form.config is not None else read_adapter_config(adapter_dir, label)
    variant = unsupported_variant(config)
    if variant is not None:
        raise AdapterError(variant_refusal(variant, label))
    header = read_weights_header(adapter_dir, label)
    if not header.tensors:
        refuse_empty(label)
    names = {t.name: normalize_key(t.name) for t in header.tensors}
    twice = sorted(name for name, count in Counter(names.values()).items() if count > 1)
    if twice:
        raise AdapterError(
            f"{label}: several saved tensors are {twice[0]} in PEFT's naming: re-save the adapter"
        )
    # Shapes only: pairing, ranks and targets need no tensor data (nor torch: a push imports it only to merge).
    pairs = lora_pairs({names[t.name]: t for t in header.tensors}, config, label)
    check_targets(pairs, config, label)
    alpha = check_alpha(config, lora, label)
    return _SavedAdapter(
        weights=adapter_dir / ADAPTER_WEIGHTS,
        header=header,
        names=names,
        config=_normalized_config(config, run, alpha),
        num_modules=len(pairs),
        header_kept=form.header_kept,
    )


def _link_or_copy(source: Path, target: Path) -> None:
    """`target` made the same file as `source`: a hard link (it outlives the checkpoint folder), else a
    symlink, else a copy."""
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
        return
    except OSError:
        pass
    try:
        os.symlink(source.resolve(), target)
    except OSError:
        shutil.copyfile(source, target)


def _publish_saved_adapter(
    saved: _SavedAdapter, out_dir: Path, label: str, alongside_others: bool
) -> FileHashes:
    """Read the saved weights once (every tensor checked, the file hashed) and put them in `out_dir`: the
    saved file itself, or a copy under PEFT's key names and the vetted header. Returns the published
    file's hashes.
    `alongside_others`: other adapters are read at the same time (see `scan_weights`).

    Raises:
        AdapterError: NaN/Inf, every lora_B zero, or weights that changed while they were read.
    """
    target = out_dir / ADAPTER_WEIGHTS
    if saved.rewritten:
        created = not out_dir.exists()
        out_dir.mkdir(parents=True, exist_ok=True)
        target.unlink(missing_ok=True)  # a link to a saved file must not be written through
        try:
            hashes = scan_weights(
                saved.weights,
                saved.header,
                saved.lora_b,
                label,
                rewrite_to=target,
                new_header=rewritten_header(saved.header, saved.names),
                alongside_others=alongside_others,
            )
        except BaseException:
            target.unlink(missing_ok=True)
            if created:
                shutil.rmtree(out_dir, ignore_errors=True)
            raise
        return hashes
    version = FileVersion.of(saved.weights)
    hashes = scan_weights(saved.weights, saved.header, saved.lora_b, label, alongside_others=alongside_others)
    if FileVersion.of(saved.weights) != version:
        raise AdapterError(
            f"{label}: {ADAPTER_WEIGHTS} changed while it was read (still being saved?): push again once "
            "the save is done"
        )
    _link_saved_weights(saved.weights, version, hashes, out_dir, label)
    return hashes


def _link_saved_weights(
    weights: Path, version: FileVersion, hashes: FileHashes, out_dir: Path, label: str
) -> None:
    """Put the saved weights file itself in `out_dir`, its hashes known (no read)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / ADAPTER_WEIGHTS
    _link_or_copy(weights, target)
    if FileVersion.of(weights) != version:
        raise AdapterError(f"{label}: {ADAPTER_WEIGHTS} changed while it was published: push again")


def prepare_adapter(
    run: Run,
    checkpoint: Checkpoint,
    out_dir: Path,
    *,
    alongside_others: bool = False,
    form: PublishedForm | None = None,
) -> PreparedAdapter:
    """Normalize and validate one checkpoint's adapter into `out_dir`.

    verl checkpoints use the saved ``actor/lora_adapter/`` when it is valid and are otherwise rebuilt from
    the FSDP shards (LoRA settings from ``lora_train_meta.json`` or the manifest's ``lora``).

    Args:
        out_dir: where to write ``adapter_config.json`` and ``adapter_model.safetensors`` (created; must
            not hold other files).
        alongside_others: other adapters are prepared at the same time (their reads keep the cores busy).
        form: how the push publishes the saved adapter's files, as it vetted them (None: as they are).

    Raises:
        CheckpointError: an incomplete, truncated or pickle-only checkpoint, or missing LoRA settings.
        AdapterError: a missing config, NaN/Inf, all-zero lora_B, lora_alpha 0, foreign keys or bad shapes.
    """
    label = f"{checkpoint.label} of run {run.manifest.run_id}"
    form = form or PublishedForm()
    if not checkpoint.complete:
        raise CheckpointError(
            f"{label} is not complete yet (still being saved?): wait for the save to finish"
        )
    out_dir = Path(out_dir)
    if out_dir.is_dir():
        strays = sorted(p.name for p in out_dir.iterdir() if p.name not in (ADAPTER_CONFIG, ADAPTER_WEIGHTS))
        if strays:
            raise ValueError(f"prepare_adapter needs an empty output directory; {out_dir} holds {strays}")
    if run.framework == "verl":
        try:
            if checkpoint.adapter_dir is None:
                raise CheckpointError(f"{label}: verl saved no lora_adapter/")
            return _prepared_saved_adapter(
                checkpoint,
                checkpoint.adapter_dir,
                run,
                out_dir,
                label,
                alongside_others,
                form,
            )
        except (AdapterError, CheckpointError) as reason:
            logger.info("%s; rebuilding the adapter from the FSDP shards", reason)
        return _prepared_rebuilt_adapter(checkpoint, run, out_dir, label)
    return _prepared_saved_adapter(
        checkpoint,
        checkpoint.adapter_dir or checkpoint.path,
        run,
        out_dir,
        label,
        alongside_others,
        form,
    )


def _prepared_rebuilt_adapter(checkpoint: Checkpoint, run: Run, out_dir: Path, label: str) -> PreparedAdapter:
    """A verl checkpoint's adapter rebuilt from its FSDP shards into `out_dir`."""
    # Imported here: torch and its DTensor classes cost 1.2-1.5 s, paid only by a verl run that needs it.
    from safetensors.torch import save_file

    from hubkit.adapters.verl_rebuild import rebuild_adapter

    rebuilt = rebuild_adapter(checkpoint, run, label)
    out_dir.mkdir(parents=True, exist_ok=True)
    weights = out_dir / ADAPTER_WEIGHTS
    weights.unlink(missing_ok=True)  # a link to a saved file must not be written through
    save_file(rebuilt.tensors, weights, metadata={"format": "pt"})
    _write_config(out_dir, rebuilt.config)
    return PreparedAdapter(
        step=checkpoint.step,
        dir=out_dir,
        config=rebuilt.config,
        num_modules=rebuilt.num_modules,
        rebuilt=True,
        weights=hash_file(weights),
    )


def _write_config(out_dir: Path, config: dict[str, Any]) -> None:
    (out_dir / ADAPTER_CONFIG).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def _check_inputs(adapter_dir: Path, run: Run) -> str | None:
    """A digest of what a saved adapter's checks read besides its weights (its config, the run's LoRA
    settings), or None when the config cannot be read (the checks then say why)."""
    config = read_saved_adapter_config(adapter_dir)
    if config is None:
        return None
    digest = json.dumps(config, sort_keys=True) + "\0" + repr(run.manifest.lora)
    return hashlib.sha256(digest.encode()).hexdigest()


def _remembered_verdict(run: Run, adapter_dir: Path) -> tuple[FileVersion | None, str | None, Verdict | None]:
    """A saved adapter's weights version, the digest of the rest of what its checks read, and the verdict
    the run directory keeps for both (None when its checks must read it)."""
    inputs = _check_inputs(adapter_dir, run)
    try:
        version = FileVersion.of(adapter_dir / ADAPTER_WEIGHTS)
    except OSError:
        return None, inputs, None  # the checks say what is missing
    verdict = (
        VerdictCache(run.run_dir).get(adapter_dir / ADAPTER_WEIGHTS, version, inputs) if inputs else None
    )
    return version, inputs, verdict


def _prepared_saved_adapter(
    checkpoint: Checkpoint,
    adapter_dir: Path,
    run: Run,
    out_dir: Path,
    label: str,
    alongside_others: bool,
    form: PublishedForm,
) -> PreparedAdapter:
    """A saved adapter checked (or known from the run directory to have passed) and put in `out_dir`."""
    weights = adapter_dir / ADAPTER_WEIGHTS
    version, inputs, verdict = _remembered_verdict(run, adapter_dir)
    if verdict is not None and form.header_kept:
        config = form.config if form.config is not None else read_adapter_config(adapter_dir, label)
        normalized = _normalized_config(config, run, config["lora_alpha"])
        _link_saved_weights(weights, version, verdict.hashes, out_dir, label)  # type: ignore[arg-type]
        rewritten = False
    else:
        saved = _checked_saved_adapter(adapter_dir, run, run.manifest.lora, label, form)
        hashes = _publish_saved_adapter(saved, out_dir, label, alongside_others)
        normalized, rewritten = saved.config, saved.rewritten
        verdict = Verdict(hashes=hashes, num_modules=saved.num_modules)
        if version and inputs and not rewritten and inputs == _check_inputs(adapter_dir, run):
            VerdictCache(run.run_dir).put(weights, version, inputs, verdict)
    _write_config(out_dir, normalized)
    return PreparedAdapter(
        step=checkpoint.step,
        dir=out_dir,
        config=normalized,
        num_modules=verdict.num_modules,
        rebuilt=False,
        weights=verdict.hashes,
        saved_weights_published=not rewritten,
    )


def prepare_adapters(
    run: Run,
    checkpoints: Sequence[Checkpoint],
    staging_dir: Path,
    *,
    forms: Mapping[int, PublishedForm] | None = None,
) -> list[PreparedAdapter]:
    """`prepare_adapter` for each checkpoint into ``staging_dir/<checkpoint name>``, several at a time.

    Each saved adapter is read once, in chunks, so reading a few at once keeps every core busy without
    holding more than a few chunks; each is then hashed on its own reading thread (see `scan_weights`).
    verl checkpoints go one at a time: rebuilding an adapter reads the actor's FSDP shards. `forms`: how the
    push publishes each saved adapter's files, by step (see `prepare_adapter`). Returns the prepared
    adapters in the order of `checkpoints`.

    Raises:
        CheckpointError, AdapterError: the first refusal in that order (see `prepare_adapter`).
    """
    workers = 1 if run.framework == "verl" else min(_PREPARE_WORKERS, os.cpu_count() or 1, len(checkpoints))
    forms = forms or {}
    if workers <= 1:
        return [prepare_adapter(run, c, staging_dir / c.name, form=forms.get(c.step)) for c in checkpoints]
    # Those the run directory remembers are not read: one new checkpoint among them is read alone.
    unread = [c for c in checkpoints if _remembered_verdict(run, c.adapter_dir or c.path)[2] is None]
    alongside_others = len(unread) > 1
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hubkit-prepare") as pool:
        futures = [
            pool.submit(
                prepare_adapter,
                run,
                c,
                staging_dir / c.name,
                alongside_others=alongside_others,
                form=forms.get(c.step),
            )
            for c in checkpoints
        ]
        try:
            return [future.result() for future in futures]
        finally:
            for future in futures:
                future.cancel()
