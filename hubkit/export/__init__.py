"""Exports of a merged model to other runtimes' formats: GGUF for llama.cpp, Ollama and LM Studio.

result = export_gguf(Path("merged"), Path("gguf"), ["q8_0", "bf16"], GGUFMetadata(name="my-run"))
"""

from __future__ import annotations

from hubkit.export.gguf import (
    GGUFExport,
    GGUFFile,
    TensorSpec,
    TensorStream,
    export_gguf,
    plan_gguf_export,
)
from hubkit.formats.gguf import FILE_TYPES, GGUFMetadata

__all__ = [
    "FILE_TYPES",
    "GGUFExport",
    "GGUFFile",
    "GGUFMetadata",
    "TensorSpec",
    "TensorStream",
    "export_gguf",
    "plan_gguf_export",
]
