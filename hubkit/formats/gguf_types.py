"""The GGUF file types hubkit writes, in one table read by `--gguf`, the export, the vetting and the cards.

Q8_0, F16 and BF16 are written by hubkit (gguf-py's encoders, as llama.cpp's converter's ``--outtype``);
the k-quants are made from hubkit's BF16 file by llama.cpp's own quantizer (``llama_model_quantize``, what
``llama-quantize`` runs), with llama.cpp's per-tensor mixture for each ``_S``/``_M``/``_L`` type. The ones
offered are those llama-quantize makes without an importance matrix (the IQ types and Q2_K_S need one).
Nothing here imports torch, gguf-py or llama.cpp: a push that writes no GGUF file imports none of them.
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
    llama_ftype: str | None = None  # made by llama.cpp's quantizer as this ``llama_ftype``; else by hubkit

    @property
    def quantized_by_llama_cpp(self) -> bool:
        return self.llama_ftype is not None


def _k_quant(name: str, figures: str) -> GGUFType:
    # `figures`: llama-quantize's own for Llama-3-8B (its size, and the perplexity added to F16's).
    return GGUFType(
        name,
        f"llama.cpp's {name} mixture of k-quants ({figures} perplexity at Llama-3-8B)",
        f"LLAMA_FTYPE_MOSTLY_{name}",
    )


# The extra that installs llama.cpp's quantizer, and the one line that says so.
QUANTIZER_EXTRA = "gguf-quant"
QUANTIZER_MISSING = (
    "the k-quant GGUF types are made by llama.cpp's quantizer (llama-cpp-python): "
    f"pip install 'hubkit[{QUANTIZER_EXTRA}]'"
)


# Smallest first, as GGUF repos list their files.
GGUF_TYPES: tuple[GGUFType, ...] = (
    _k_quant("Q2_K", "2.96 GB, +3.5199"),
    _k_quant("Q3_K_S", "3.41 GB, +1.6321"),
    _k_quant("Q3_K_M", "3.74 GB, +0.6569"),
    _k_quant("Q3_K_L", "4.03 GB, +0.5562"),
    _k_quant("Q4_K_S", "4.37 GB, +0.2689"),
    _k_quant("Q4_K_M", "4.58 GB, +0.1754"),
    _k_quant("Q5_K_S", "5.21 GB, +0.1049"),
    _k_quant("Q5_K_M", "5.33 GB, +0.0569"),
    _k_quant("Q6_K", "6.14 GB, +0.0217"),
    GGUFType("Q8_0", "8-bit blocks of 32 with a float16 scale"),
    GGUFType("F16", "float16"),
    GGUFType("BF16", "bfloat16, the merged weights' own bits"),
)
_BY_KEY = {t.name.lower(): t for t in GGUF_TYPES}
# Where a GGUF repo keeps each checkpoint's GGUF LoRA and the base model's GGUF files they apply over.
LORA_FOLDER, BASE_FOLDER = "lora", "base"
# NAME-TYPE.gguf at a repo's root, as the export names its files, or in one of those folders.
FILE_NAME_RE = re.compile(
    rf"^(?:(?:{LORA_FOLDER}|{BASE_FOLDER})/)?[A-Za-z0-9][A-Za-z0-9._-]*-({'|'.join(t.name for t in GGUF_TYPES)})\.gguf$"
)


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


def made_by_llama_cpp(name: str) -> bool:
    """Whether the type named (``Q4_K_M``) is made by llama.cpp's quantizer (False when unknown)."""
    found = _BY_KEY.get(name.lower())
    return found is not None and found.quantized_by_llama_cpp


def listing_order(name: str) -> int:
    """Where a type goes in a card's file list (smallest first; an unknown name last)."""
    names = [t.name for t in GGUF_TYPES]
    return names.index(name) if name in names else len(names)


def weights_of(name: str) -> str:
    """What a type's 2-D weights are stored as, for the card (the name itself when unknown)."""
    found = _BY_KEY.get(name.lower())
    return found.weights if found is not None else name
