"""PEFT adapter normalization and validation, before anything is uploaded.

`prepare_adapter` turns one checkpoint's adapter (TRL's, verl's ``lora_adapter/``, or one rebuilt from verl's
FSDP shards) into a directory holding exactly ``adapter_config.json`` + ``adapter_model.safetensors`` in PEFT
form, and refuses adapters that would not load or would load as a no-op. `check_against_base` then checks
its module names and shapes against the base model's Linear layers, from the base's ``config.json``
alone (`hubkit.base_linears`; no weights downloaded).

A saved adapter is read once (`hubkit.adapter_weights.scan_weights`: every tensor checked, the file
hashed) and only its config is rewritten: the weights file itself is published (linked into the
output directory) unless its keys are not PEFT's, and a later push of the same file reads none of
its tensors again (the run directory remembers the read).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from hubkit.adapter_weights import Verdict, VerdictCache, rewritten_header, scan_weights
from hubkit.base_linears import linear_shapes
from hubkit.errors import AdapterError, BaseModelMismatchError, CheckpointError
from hubkit.hashing import FileHashes, FileVersion, hash_file, remember_hashes
from hubkit.manifest import LoraSettings
from hubkit.peft_adapter import (
    ADAPTER_CONFIG,
    ADAPTER_FILES,
    ADAPTER_WEIGHTS,
    LoraPair,
    lora_pairs,
    normalize_key,
    parse_lora_key,
    read_adapter_config,
    read_weights_header,
)
from hubkit.runs.model import Checkpoint, Run
from hubkit.runs.verl import lora_from_meta
from hubkit.safetensors_header import SafetensorsHeader

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

# Adapters read at once by `prepare_adapters` (at most one per core).
_PREPARE_WORKERS = 4
# Passing checks of adapter files against a base config, kept in the run directory (never published).
BASE_CHECKS_DIR = Path(".hubkit") / "base-checks"
# The Linear shapes of each base config, kept there too: a layout hubkit cannot read off the config is
# built on the meta device by transformers, whose import and model code cost seconds.
BASE_SHAPES_DIR = Path(".hubkit") / "base-shapes"


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


# --- validation -----------------------------------------------------------------------------------


def _refuse_empty(label: str) -> NoReturn:
    raise AdapterError(
        f"{label}: the adapter holds no tensors (verl 0.6.1 with PEFT >= 0.21 saves empty adapters); "
        "it would load as a no-op"
    )


def _checked_pairs(
    tensors: dict[str, torch.Tensor], config: dict[str, Any], label: str
) -> dict[str, LoraPair]:
    """The adapter's LoRA pairs (see `hubkit.peft_adapter.lora_pairs`), refusing NaN/Inf and no-op adapters."""
    import torch

    if not tensors:
        _refuse_empty(label)
    for key, tensor in tensors.items():
        if not torch.isfinite(tensor).all():
            raise AdapterError(
                f"{label}: {key} contains NaN or Inf: training diverged at or before this step"
            )
    pairs = lora_pairs(tensors, config, label)
    if all(not pair.lora_b.any() for pair in pairs.values()):
        raise AdapterError(
            f"{label}: every lora_B is zero: the adapter is untrained and would load as a no-op"
        )
    return pairs


def _is_targeted(module: str, targets: object) -> bool:
    """Whether PEFT would put a LoRA layer on `module` for this ``target_modules`` (its matching rules)."""
    if isinstance(targets, str):
        return targets == "all-linear" or re.fullmatch(targets, module) is not None
    if isinstance(targets, list):
        return any(module == t or module.endswith(f".{t}") for t in targets)
    return False


def _check_targets(pairs: dict[str, Any], config: dict[str, Any], label: str) -> None:
    """Refuse weights for modules the config does not target: PEFT would silently not load them."""
    targets = config.get("target_modules")
    for module in pairs:
        if not _is_targeted(module, targets):
            raise AdapterError(
                f"{label}: module {module} has LoRA weights but target_modules {targets!r} does not include it "
                "(PEFT would skip them)"
            )


def _alpha(config: dict[str, Any], lora: LoraSettings | None, label: str) -> float:
    alpha = config.get("lora_alpha")
    if not isinstance(alpha, int | float) or isinstance(alpha, bool) or alpha <= 0:
        raise AdapterError(
            f"{label}: lora_alpha is {alpha!r}: the adapter would load as a no-op; set the real alpha"
        )
    if lora is not None and float(alpha) != float(lora.alpha):
        raise AdapterError(
            f"{label}: {ADAPTER_CONFIG} says lora_alpha={alpha} but hubkit.json says {lora.alpha}: fix the manifest"
        )
    return alpha


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


def _rebuilt_config(modules: set[str], lora: LoraSettings, run: Run) -> dict[str, Any]:
    """A LoRA config for tensors rebuilt from verl's shards (verl builds LoRA with these fixed settings)."""
    return {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": run.manifest.base_model,
        "revision": run.manifest.base_model_revision,
        "r": lora.r,
        "lora_alpha": lora.alpha,
        "lora_dropout": lora.dropout,
        "use_rslora": lora.use_rslora,
        "bias": "none",
        "target_modules": sorted({module.rsplit(".", 1)[-1] for module in modules}),
        "inference_mode": True,
        "fan_in_fan_out": False,
        "use_dora": False,
        "init_lora_weights": True,
        "modules_to_save": None,
    }


@dataclass(frozen=True)
class _SavedAdapter:
    """A saved adapter whose config and header passed every check; its tensor data is not read yet."""

    weights: Path
    header: SafetensorsHeader
    names: dict[str, str]  # saved tensor name → PEFT name
    config: dict[str, Any]  # normalized
    num_modules: int

    @property
    def lora_b(self) -> set[str]:
        return {saved for saved, name in self.names.items() if (parse_lora_key(name) or ("", ""))[1] == "B"}

    @property
    def renamed(self) -> bool:
        return any(saved != name for saved, name in self.names.items())


def _checked_saved_adapter(
    adapter_dir: Path, run: Run, lora: LoraSettings | None, label: str
) -> _SavedAdapter:
    """Every check a saved adapter's config and safetensors header allow, before any tensor is read."""
    config = read_adapter_config(adapter_dir, label)
    if config.get("peft_type", "LORA") != "LORA":
        raise AdapterError(f"{label}: peft_type {config.get('peft_type')!r} is not LoRA")
    header = read_weights_header(adapter_dir, label)
    if not header.tensors:
        _refuse_empty(label)
    names = {t.name: normalize_key(t.name) for t in header.tensors}
    twice = sorted(name for name, count in Counter(names.values()).items() if count > 1)
    if twice:
        raise AdapterError(
            f"{label}: several saved tensors are {twice[0]} in PEFT's naming: re-save the adapter"
        )
    # Shapes only: pairing, ranks and targets need no tensor data (nor torch: a push imports it only to merge).
    pairs = lora_pairs({names[t.name]: t for t in header.tensors}, config, label)
    _check_targets(pairs, config, label)
    alpha = _alpha(config, lora, label)
    return _SavedAdapter(
        weights=adapter_dir / ADAPTER_WEIGHTS,
        header=header,
        names=names,
        config=_normalized_config(config, run, alpha),
        num_modules=len(pairs),
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
    saved file itself, or a copy under PEFT's key names. Returns the published file's hashes.
    `alongside_others`: other adapters are read at the same time (see `scan_weights`).

    Raises:
        AdapterError: NaN/Inf, every lora_B zero, or weights that changed while they were read.
    """
    target = out_dir / ADAPTER_WEIGHTS
    if saved.renamed:
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
        remember_hashes(FileVersion.of(target), hashes)
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
    remember_hashes(FileVersion.of(target), hashes)


def _rebuilt_adapter(
    checkpoint: Checkpoint, run: Run, label: str
) -> tuple[dict[str, torch.Tensor], dict[str, Any], int]:
    # Imported here: only verl runs need torch.distributed's DTensor classes.
    from hubkit.verl_shards import load_lora_tensors

    actor_dir = checkpoint.path / "actor"
    lora = lora_from_meta(actor_dir) or run.manifest.lora
    if lora is None:
        raise CheckpointError(
            f"{label}: its adapter must be rebuilt from the FSDP shards but LoRA r/alpha are unknown "
            "(no lora_train_meta.json): add lora to hubkit.json"
        )
    tensors = {normalize_key(k): v for k, v in load_lora_tensors(actor_dir, label).items()}
    config = _rebuilt_config({parse_lora_key(k)[0] for k in tensors if parse_lora_key(k)}, lora, run)
    pairs = _checked_pairs(tensors, config, label)
    return tensors, config, len(pairs)


def prepare_adapter(
    run: Run, checkpoint: Checkpoint, out_dir: Path, *, alongside_others: bool = False
) -> PreparedAdapter:
    """Normalize and validate one checkpoint's adapter into `out_dir`.

    verl checkpoints use the saved ``actor/lora_adapter/`` when it is valid and are otherwise rebuilt from
    the FSDP shards (LoRA settings from ``lora_train_meta.json`` or the manifest's ``lora``).

    Args:
        run: the run the checkpoint belongs to (base model id and revision, LoRA settings).
        checkpoint: a complete checkpoint of that run.
        out_dir: where to write ``adapter_config.json`` and ``adapter_model.safetensors`` (created; must
            not hold other files).
        alongside_others: other adapters are prepared at the same time (their reads keep the cores busy).

    Returns:
        The prepared adapter.

    Raises:
        CheckpointError: an incomplete, truncated or pickle-only checkpoint, or missing LoRA settings.
        AdapterError: a missing config, NaN/Inf, all-zero lora_B, lora_alpha 0, foreign keys or bad shapes.
    """
    label = f"checkpoint {checkpoint.name} of run {run.manifest.run_id}"
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
                checkpoint, checkpoint.adapter_dir, run, out_dir, label, alongside_others
            )
        except (AdapterError, CheckpointError) as reason:
            logger.info("%s; rebuilding the adapter from the FSDP shards", reason)
        tensors, config, num_modules = _rebuilt_adapter(checkpoint, run, label)
        from safetensors.torch import save_file

        out_dir.mkdir(parents=True, exist_ok=True)
        weights = out_dir / ADAPTER_WEIGHTS
        weights.unlink(missing_ok=True)  # a link to a saved file must not be written through
        save_file(tensors, weights, metadata={"format": "pt"})
        _write_config(out_dir, config)
        return PreparedAdapter(
            step=checkpoint.step,
            dir=out_dir,
            config=config,
            num_modules=num_modules,
            rebuilt=True,
            weights=hash_file(weights),
        )
    return _prepared_saved_adapter(
        checkpoint, checkpoint.adapter_dir or checkpoint.path, run, out_dir, label, alongside_others
    )


def _write_config(out_dir: Path, config: dict[str, Any]) -> None:
    (out_dir / ADAPTER_CONFIG).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def _check_inputs(adapter_dir: Path, run: Run) -> str | None:
    """A digest of what a saved adapter's checks read besides its weights (its config, the run's LoRA
    settings), or None when the config cannot be read (the checks then say why)."""
    try:
        config = (adapter_dir / ADAPTER_CONFIG).read_bytes()
    except OSError:
        return None
    return hashlib.sha256(config + b"\0" + repr(run.manifest.lora).encode()).hexdigest()


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
    checkpoint: Checkpoint, adapter_dir: Path, run: Run, out_dir: Path, label: str, alongside_others: bool
) -> PreparedAdapter:
    """A saved adapter checked (or known from the run directory to have passed) and put in `out_dir`."""
    weights = adapter_dir / ADAPTER_WEIGHTS
    version, inputs, verdict = _remembered_verdict(run, adapter_dir)
    if verdict is not None:
        config = read_adapter_config(adapter_dir, label)
        normalized = _normalized_config(config, run, config["lora_alpha"])
        _link_saved_weights(weights, version, verdict.hashes, out_dir, label)  # type: ignore[arg-type]
        renamed = False
    else:
        saved = _checked_saved_adapter(adapter_dir, run, run.manifest.lora, label)
        hashes = _publish_saved_adapter(saved, out_dir, label, alongside_others)
        normalized, renamed = saved.config, saved.renamed
        verdict = Verdict(hashes=hashes, num_modules=saved.num_modules)
        if version and inputs and not renamed and inputs == _check_inputs(adapter_dir, run):
            VerdictCache(run.run_dir).put(weights, version, inputs, verdict)
    _write_config(out_dir, normalized)
    return PreparedAdapter(
        step=checkpoint.step,
        dir=out_dir,
        config=normalized,
        num_modules=verdict.num_modules,
        rebuilt=False,
        weights=verdict.hashes,
        saved_weights_published=not renamed,
    )


def prepare_adapters(run: Run, checkpoints: Sequence[Checkpoint], staging_dir: Path) -> list[PreparedAdapter]:
    """`prepare_adapter` for each checkpoint into ``staging_dir/<checkpoint name>``, several at a time.

    Each saved adapter is read once, in chunks, so reading a few at once keeps every core busy without
    holding more than a few chunks; each is then hashed on its own reading thread (see `scan_weights`).
    verl checkpoints go one at a time: rebuilding an adapter reads the actor's FSDP shards.

    Args:
        run: the run.
        checkpoints: its complete checkpoints to prepare.
        staging_dir: where each one's directory is made.

    Returns:
        The prepared adapters, in the order of `checkpoints`.

    Raises:
        CheckpointError, AdapterError: the first refusal in that order (see `prepare_adapter`).
    """
    workers = 1 if run.framework == "verl" else min(_PREPARE_WORKERS, os.cpu_count() or 1, len(checkpoints))
    if workers <= 1:
        return [prepare_adapter(run, c, staging_dir / c.name) for c in checkpoints]
    # Those the run directory remembers are not read: one new checkpoint among them is read alone.
    unread = [c for c in checkpoints if _remembered_verdict(run, c.adapter_dir or c.path)[2] is None]
    alongside_others = len(unread) > 1
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hubkit-prepare") as pool:
        futures = [
            pool.submit(prepare_adapter, run, c, staging_dir / c.name, alongside_others=alongside_others)
            for c in checkpoints
        ]
        try:
            return [future.result() for future in futures]
        finally:
            for future in futures:
                future.cancel()


# --- checking against the base model --------------------------------------------------------------


@lru_cache(maxsize=8)
def download_base_config(
    base_model: str, revision: str | None, endpoint: str | None, token: str | None
) -> Path:
    """The base's ``config.json``, downloaded (into the client's cache) once per process.

    Raises:
        BaseModelMismatchError: the base model, its revision or its config is not on the Hub.
    """
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError

    try:
        return Path(
            hf_hub_download(base_model, "config.json", revision=revision, endpoint=endpoint, token=token)
        )
    except (RepositoryNotFoundError, RevisionNotFoundError, EntryNotFoundError) as e:
        at = f" at revision {revision}" if revision else ""
        raise BaseModelMismatchError(
            f"base model {base_model}{at} has no config.json on the Hub: check the base model id"
        ) from e


@lru_cache(maxsize=8)
def _base_config_key(config_path: Path) -> str:
    """What a base check depends on besides the adapter file: the config's content, and transformers."""
    from importlib.metadata import version as installed

    return f"{hashlib.sha256(config_path.read_bytes()).hexdigest()}\n{installed('transformers')}"


def _remembered_linear_shapes(run_dir: Path, config_path: Path) -> dict[str, tuple[int, int]]:
    """`linear_shapes`, kept in `run_dir` by the config's content and the transformers version."""
    path = (
        run_dir
        / BASE_SHAPES_DIR
        / f"{hashlib.sha256(_base_config_key(config_path).encode()).hexdigest()[:32]}.json"
    )
    try:
        linears = json.loads(path.read_text())["linears"]
        return {str(name): (int(shape[0]), int(shape[1])) for name, shape in linears.items()}
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
        pass  # not remembered yet, or unreadable: built again
    shapes = linear_shapes(config_path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"linears": shapes}, indent=0) + "\n")
        os.replace(tmp, path)
    except OSError as e:
        logger.debug("could not remember the base model's shapes in the run directory (%s)", e.strerror)
    return shapes


def _base_check_record(run_dir: Path, weights: Path, config_path: Path) -> Path | None:
    """Where a passing check of this version of `weights` against this base config is remembered."""
    try:
        weights_version = FileVersion.of(weights)
    except OSError:
        return None  # the check says what is missing
    key = f"{weights_version}\n{_base_config_key(config_path)}"
    return run_dir / BASE_CHECKS_DIR / hashlib.sha256(key.encode()).hexdigest()[:32]


def check_against_base(
    adapter_dir: Path,
    base_model: str,
    revision: str | None = None,
    *,
    label: str | None = None,
    endpoint: str | None = None,
    token: str | None = None,
    run_dir: Path | None = None,
) -> None:
    """Check that every adapted module exists in the base model, with matching shapes.

    Only the base's ``config.json`` is downloaded (``hf_hub_download``); the model is built on the meta
    device. Repeated checks against the same base reuse that model's shapes.

    Args:
        adapter_dir: a prepared adapter directory (see `prepare_adapter`).
        base_model: the base model's Hub id.
        revision: the base model revision, if pinned.
        label: how errors name the checkpoint; default the directory name.
        endpoint: the Hub holding the base model (default: `HF_ENDPOINT`, else huggingface.co).
        token: the token for that Hub (default: the client's own lookup).
        run_dir: the adapter's run directory: a passing check is remembered there (`.hubkit/base-checks/`,
            by weights file version and base config), and that file is not checked against that config again;
            so are the base's shapes (`.hubkit/base-shapes/`), which are then not built again.

    Raises:
        BaseModelMismatchError: the base has no config, or a module is missing or has other shapes.
        AdapterError: the adapter weights file is missing or truncated.
    """
    label = label or adapter_dir.name
    config_path = download_base_config(base_model, revision, endpoint, token)
    record = (
        _base_check_record(run_dir, Path(adapter_dir) / ADAPTER_WEIGHTS, config_path) if run_dir else None
    )
    if record is not None and record.exists():
        return
    header = read_weights_header(Path(adapter_dir), label)
    linears = _remembered_linear_shapes(run_dir, config_path) if run_dir else linear_shapes(config_path)
    for tensor in header.tensors:
        key = tensor.name
        parsed = parse_lora_key(key)
        if parsed is None:
            raise BaseModelMismatchError(f"{label}: {key!r} is not a LoRA weight of a {base_model} module")
        module, part = parsed
        if module not in linears:
            raise BaseModelMismatchError(
                f"{label}: module {module} does not exist in {base_model}: was it trained on another base?"
            )
        in_features, out_features = linears[module]
        shape = tensor.shape
        expected_dim, actual_dim = (in_features, shape[1]) if part == "A" else (out_features, shape[0])
        if actual_dim != expected_dim:
            raise BaseModelMismatchError(
                f"{label}: {module}.lora_{part} has shape {shape} but {base_model}'s {module} "
                f"is {in_features}->{out_features}: was it trained on another base?"
            )
    if record is not None:
        try:
            record.parent.mkdir(parents=True, exist_ok=True)
            record.touch()
        except OSError as e:
            logger.debug("could not remember a base model check in the run directory (%s)", e.strerror)
