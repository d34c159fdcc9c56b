"""The GGUF file types hubkit writes, in one table read by `--gguf`, the export, the vetting and the cards.

They are the types llama.cpp's converter writes without its compiled ``llama-quantize`` (its ``--outtype``
choices). Nothing here imports torch or gguf-py: a push that writes no GGUF file imports neither.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class GGUFType:
    """One type: its name as llama.cpp spells it (file names, ``llama-cli -hf REPO:Q8_0``, gguf-py's enums)
    and what its 2-D weights are stored as, as the GGUF card says it."""

    name: str
    weights: str


# Smallest first, as GGUF repos list their files.
GGUF_TYPES: tuple[GGUFType, ...] = (
    GGUFType("Q8_0", "8-bit blocks of 32 with a float16 scale"),
    GGUFType("F16", "float16"),
    GGUFType("BF16", "bfloat16, the merged weights' own bits"),
)
_BY_KEY = {t.name.lower(): t for t in GGUF_TYPES}
# NAME-TYPE.gguf at a repo's root, as the export names its files.
FILE_NAME_RE = re.compile(rf"^[A-Za-z0-9][A-Za-z0-9._-]*-({'|'.join(t.name for t in GGUF_TYPES)})\.gguf$")


def choose_types(asked: Sequence[str]) -> tuple[GGUFType, ...]:
    """The types asked for (case-insensitive), each once, in the order given.

    Raises:
        ValueError: a name that is none of `GGUF_TYPES`, naming the choices.
    """
    chosen: dict[str, GGUFType] = {}
    for name in asked:
        key = name.strip().lower()
        if key not in _BY_KEY:
            raise ValueError(f"unknown GGUF type {name!r}: use one or more of {', '.join(_BY_KEY)}")
        chosen.setdefault(key, _BY_KEY[key])
    return tuple(chosen.values())


def listing_order(name: str) -> int:
    """Where a type goes in a card's file list (smallest first; an unknown name last)."""
    names = [t.name for t in GGUF_TYPES]
    return names.index(name) if name in names else len(names)


def weights_of(name: str) -> str:
    """What a type's 2-D weights are stored as, for the card (the name itself when unknown)."""
    found = _BY_KEY.get(name.lower())
    return found.weights if found is not None else name
