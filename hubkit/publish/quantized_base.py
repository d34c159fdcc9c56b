"""A release of a run trained on a quantized (4-bit) base: published against its full-precision base
when one is given or known (`hubkit.runs.base_model`), else refused where the quantized base cannot
serve: a merge (4-bit weights are not merged into), or a Space whose requirements cannot load it."""

from __future__ import annotations

import re

from hubkit.errors import QuantizedBaseError
from hubkit.formats.model_config import ModelConfig
from hubkit.runs import Run
from hubkit.space.files import pinned_requirements

_REQUIREMENT_NAME_RE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def requirements_have_bitsandbytes(requirements: str) -> bool:
    """Whether a requirements.txt installs bitsandbytes (what transformers loads a 4-bit base with)."""
    for line in requirements.splitlines():
        match = _REQUIREMENT_NAME_RE.match(line.split("#", 1)[0])
        if match and match.group(1).lower().replace("_", "-") == "bitsandbytes":
            return True
    return False


def check_quantized_base(run: Run, config: ModelConfig | None, *, merging: bool, space: bool) -> list[str]:
    """Refuse a release that would name a quantized base (`Run.quantized_base`) where it cannot serve: the
    merge, or the Space (whose pinned requirements must load it); the note when it was swapped. `config` is
    None for a dry run that never downloaded it.

    Raises:
        QuantizedBaseError: the release would merge into, or a Space without bitsandbytes would load, a
            quantized base.
    """
    quantized = run.quantized_base
    named = run.manifest.base_model
    if quantized is not None and quantized.full_precision is not None:
        return [quantized.note]
    if quantized is None and not (config is not None and config.quantized):
        return []
    what = f"{named} is a quantized base (QLoRA)"
    if merging:
        raise QuantizedBaseError(
            f"{what}: it cannot be merged into; pass --base-model ORG/NAME (its full-precision base) or --no-merged"
        )
    if space and not requirements_have_bitsandbytes(pinned_requirements()):
        raise QuantizedBaseError(
            f"{what} and the Space's requirements lack bitsandbytes to load it: pass --base-model ORG/NAME "
            "(its full-precision base) or --no-space"
        )
    return [quantized.note] if quantized is not None else []
