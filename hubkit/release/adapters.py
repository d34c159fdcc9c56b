"""A release's adapters checked against the base model before PEFT loads any of them: what PEFT would
build from a config is bounded by the config alone, so a hostile one is refused here in one line.

    check_adapters_against_base({"global_step_200": folder}, base)           # `hubkit eval --repo-id`
    check_published_adapters(release, endpoint=..., token=...)               # `hubkit space --repo-id`

Each adapter: its config's ranks and its weights' declared shapes (the safetensors header, no tensor
read) against the base's modules (`hubkit.adapters.base_check.check_against_base`); ``target_modules``
must name a module the base has (PEFT stops when none matches: NoMatchingPeftModuleError), and ``layer_replication`` (PEFT copies base layers as it loads, as many times
as the config says) is refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from hubkit.adapters.base_check import BaseConfig, check_against_base, linear_shapes
from hubkit.errors import ReleaseError
from hubkit.formats.peft import ADAPTER_CONFIG, ADAPTER_FILES, read_adapter_config
from hubkit.formats.tokenizer import GENERATION_CONFIG
from hubkit.hub.download import download_repo_file
from hubkit.release.base_files import check_base_files, check_tokenizer_files
from hubkit.release.layout import TOKENIZER_FILES, checkpoint_dir, checkpoint_files
from hubkit.release.read import Release, download_release_files

# Module names PEFT adapts that are no Linear of the base (a LoRA on the token embedding).
EMBEDDINGS = frozenset({"embed_tokens"})
# A target_modules pattern is a regular expression PEFT matches against every module name.
MAX_PATTERN = 256


def _check_targets(adapter_dir: Path, modules: set[str], base_model: str, label: str) -> None:
    config = read_adapter_config(adapter_dir, label)
    where = f"{label}: {ADAPTER_CONFIG}"
    if config.get("layer_replication"):
        raise ReleaseError(
            f"{where}: layer_replication copies the base's layers as PEFT loads it, which hubkit does not "
            "load: publish the adapter without it"
        )
    targets = config.get("target_modules")
    if isinstance(targets, list) and targets:
        # PEFT adapts the modules that match and stops only when none does (NoMatchingPeftModuleError).
        found = [t for t in targets if t in EMBEDDINGS or any(m == t or m.endswith("." + t) for m in modules)]
        if not found:
            names = ", ".join(repr(t[:80]) for t in targets[:3])
            raise ReleaseError(
                f"{where}: target_modules names {names}, none of which {base_model} has: was it trained "
                "on another base?"
            )
    elif isinstance(targets, str) and targets != "all-linear":
        if len(targets) > MAX_PATTERN:
            raise ReleaseError(f"{where}: target_modules is a pattern of more than {MAX_PATTERN} characters")
        try:
            matched = any(re.fullmatch(targets, m) for m in modules)
        except re.error as e:
            raise ReleaseError(f"{where}: target_modules is not a pattern ({e})") from e
        if not matched:
            raise ReleaseError(f"{where}: target_modules matches no module of {base_model}")


def check_adapters_against_base(adapter_dirs: Mapping[str, Path], base: BaseConfig) -> None:
    """Check each adapter (label → folder) against `base`, before any is loaded.

    Raises:
        ReleaseError: target_modules the base does not have, layer_replication.
        AdapterError, BaseModelMismatchError: a rank out of bounds, weights whose declared shapes are not
            the base's modules' (`check_against_base`).
    """
    if not adapter_dirs:
        return
    modules = set(linear_shapes(base))
    for label, adapter_dir in adapter_dirs.items():
        _check_targets(adapter_dir, modules, base.base_model, label)
        check_against_base(adapter_dir, base, label=label)


def check_published_adapters(release: Release, *, endpoint: str | None, token: str | None) -> None:
    """Download every adapter `release` publishes (its root's and each step's), its tokenizer and the base's
    config, and check them as `check_adapters_against_base` and `hubkit.release.base_files` do.

    Raises:
        ReleaseError, AdapterError, BaseModelMismatchError: as `check_adapters_against_base`, or the base's
            config is refused (`check_base_files`).
        HubError: a download failed.
    """
    manifest = release.manifest
    paths = [*ADAPTER_FILES, *TOKENIZER_FILES]
    paths += [path for step in release.steps for path in checkpoint_files(step)]
    folder = download_release_files(release, paths, endpoint=endpoint, token=token)
    base = BaseConfig.download(
        manifest.base_model, manifest.base_model_revision, endpoint=endpoint, token=token
    )
    # Beside the config in the client's cache, where the app's transformers reads it.
    where = {"revision": manifest.base_model_revision, "endpoint": endpoint, "token": token}
    download_repo_file(manifest.base_model, GENERATION_CONFIG, **where)
    vocab_size = check_base_files(base.path.parent, manifest.base_model)
    if release.has_tokenizer:  # the app's tokenizer (else the base's, which transformers reads as it loads)
        check_tokenizer_files(folder, vocab_size, release.repo_id)
    dirs = {f"global_step_{step}": folder / checkpoint_dir(step) for step in release.steps}
    if all(name in release.files for name in ADAPTER_FILES):
        dirs = {"the root adapter": folder, **dirs}
    check_adapters_against_base(dirs, base)
