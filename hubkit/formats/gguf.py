"""GGUF files as llama.cpp's own converter writes them, for the architectures hubkit exports.

GGUF, llama.cpp's format, is a header (key/value metadata, then each tensor's name, shape, type and
offset) followed by the tensors' bytes, each aligned to 32 bytes. The `gguf` package (llama.cpp's gguf-py)
knows every key, every architecture's tensor names (`TensorNameMap`) and quantizes in numpy. This module
decides what llama.cpp's ``convert_hf_to_gguf.py`` decides for Qwen3, Qwen2/2.5 and Llama (its
``conversion/base.py``, ``qwen.py`` and ``llama.py``): the hyperparameter keys, each tensor's GGUF name and
type, Llama's q/k row order. `GGUFFileWriter` writes the header from what is known before any tensor is
read, so that the tensors can then be streamed in one at a time.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import gguf
import numpy
import torch
from gguf import GGMLQuantizationType, GGUFValueType, LlamaFileType

from hubkit.errors import FileFormatError, GGUFExportError
from hubkit.formats.gguf_types import GGUF_TYPES, GGUFType, choose_types
from hubkit.formats.json_file import parse_json_object, read_bounded

# --- file types ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileType:
    """One kind of GGUF file: what its 2-D weights are stored as.

    Attributes:
        name: as llama.cpp spells it in file names and in ``llama-cli -hf REPO:Q8_0``.
        tensor_type: the type of every 2-D weight (1-D tensors and norms are always F32).
        file_type: the ``general.file_type`` value.
    """

    name: str
    tensor_type: GGMLQuantizationType
    file_type: LlamaFileType


# The types of `hubkit.formats.gguf_types`' table that hubkit writes itself (the k-quants are llama.cpp's
# quantizer's, `hubkit.export.gguf_quantize`), with gguf-py's enums, found by llama.cpp's names.
FILE_TYPES: dict[str, FileType] = {
    t.name.lower(): FileType(t.name, GGMLQuantizationType[t.name], LlamaFileType[f"MOSTLY_{t.name}"])
    for t in GGUF_TYPES
    if not t.quantized_by_llama_cpp
}


def file_types(names: Iterable[str]) -> tuple[FileType, ...]:
    """The file types hubkit writes itself among those named (case-insensitive, each once, in the order
    given); the k-quants among them are left to `gguf_types.choose_types`' callers.

    Raises:
        GGUFExportError: none named, or a name that is not one of `gguf_types.GGUF_TYPES`.
    """
    chosen = choose_gguf_types(names)
    return tuple(FILE_TYPES[t.name.lower()] for t in chosen if not t.quantized_by_llama_cpp)


def choose_gguf_types(names: Iterable[str]) -> tuple[GGUFType, ...]:
    """`gguf_types.choose_types`, refusing as the export refuses.

    Raises:
        GGUFExportError: none named, or an unknown name.
    """
    try:
        chosen = choose_types(list(names))
    except ValueError as e:
        raise GGUFExportError(str(e)) from e
    if not chosen:
        raise GGUFExportError(
            f"no GGUF type given: choose from {', '.join(t.name.lower() for t in GGUF_TYPES)}"
        )
    return chosen


# --- metadata -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class MetadataField:
    """One key/value of a GGUF header, typed as gguf's writer typed it."""

    key: str
    value: Any
    type: GGUFValueType
    sub_type: GGUFValueType | None = None


def collect_fields(architecture: str, fill: Callable[[gguf.GGUFWriter], None]) -> tuple[MetadataField, ...]:
    """The key/values that `fill` adds through gguf's own writer methods (``add_block_count``, ...).

    No file is opened: the writer only records them, so every key is spelled and typed by gguf itself.
    ``general.architecture``, which a writer adds on creation, is left out.
    """
    scratch = gguf.GGUFWriter(None, architecture)
    scratch.kv_data[0].clear()
    fill(scratch)
    return tuple(MetadataField(key, v.value, v.type, v.sub_type) for key, v in scratch.kv_data[0].items())


HUB_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


@dataclass(frozen=True)
class GGUFMetadata:
    """What a file's ``general.*`` keys say about the model.

    Attributes:
        name: ``general.name``, e.g. the release's repo name.
        base_model: the Hub id of the model these weights are (the merged repo), or None.
        license: ``general.license``, as on the model card (``apache-2.0``), or None.
        hub_url: where `base_model` lives, for ``general.base_model.0.repo_url``.
    """

    name: str
    base_model: str | None = None
    license: str | None = None
    hub_url: str = "https://huggingface.co"

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise GGUFExportError("a GGUF file needs a name (general.name)")
        # A repo id, never a local folder: the file is published.
        if self.base_model is not None and not HUB_REPO_ID.fullmatch(self.base_model):
            raise GGUFExportError(f"base model {self.base_model!r} is not a Hub repo id like Qwen/Qwen3-4B")


# generation_config.json keys the converter copies into general.sampling.* (gguf.Metadata.load).
SAMPLING_KEYS = {
    "sequence": "sampling_sequence", "top_k": "sampling_top_k", "top_p": "sampling_top_p",
    "min_p": "sampling_min_p", "xtc_probability": "sampling_xtc_probability",
    "xtc_threshold": "sampling_xtc_threshold", "temperature": "sampling_temp",
    "penalty_last_n": "sampling_penalty_last_n", "penalty_repeat": "sampling_penalty_repeat",
    "mirostat": "sampling_mirostat", "mirostat_tau": "sampling_mirostat_tau",
    "mirostat_eta": "sampling_mirostat_eta",
}  # fmt: skip


def base_model_entries(metadata: GGUFMetadata) -> list[dict[str, str]] | None:
    """``general.base_model.0.*`` as the converter writes it for a Hub id (name, organization, version,
    repo_url), or None when the metadata names no base model."""
    if not metadata.base_model:
        return None
    full_name, org, _, _, version, _ = gguf.Metadata.get_model_id_components(metadata.base_model, 0)
    entry: dict[str, str] = {"repo_url": f"{metadata.hub_url.rstrip('/')}/{metadata.base_model}"}
    if full_name:
        entry["name"] = gguf.Metadata.id_to_title(full_name)
    if org:
        entry["organization"] = gguf.Metadata.id_to_title(org)
    if version:
        entry["version"] = version
    return [entry]


def general_fields(
    architecture: str, metadata: GGUFMetadata, total_params: int, generation_config: dict[str, Any]
) -> tuple[MetadataField, ...]:
    """``general.type``, the sampling defaults, name, size label, licence and base model, as the converter
    writes them (``gguf.Metadata.set_gguf_meta_model``), from what the caller states rather than from
    guesses on folder names: a local path never reaches the file."""
    meta = gguf.Metadata(
        name=metadata.name,
        license=metadata.license,
        size_label=gguf.size_label(total_params, total_params, 0, 0),
    )
    for key, attribute in SAMPLING_KEYS.items():
        if generation_config.get(key) is not None:
            setattr(meta, attribute, generation_config[key])
    meta.base_models = base_model_entries(metadata)

    def fill(writer: gguf.GGUFWriter) -> None:
        writer.add_type(gguf.GGUFType.MODEL)
        meta.set_gguf_meta_model(writer)

    return collect_fields(architecture, fill)


# --- tensors ------------------------------------------------------------------------------------

# Tensors transformers may save that are buffers, not weights (the converter skips the same suffixes).
SKIPPED_SUFFIXES = (".attention.masked_bias", ".attention.bias", ".rotary_emb.inv_freq")


@dataclass(frozen=True)
class TensorLayout:
    """One tensor of one GGUF file.

    Attributes:
        name: its GGUF name, e.g. ``blk.0.attn_q.weight``.
        shape: row-major, as in the safetensors file (GGUF stores it reversed, innermost first).
        tensor_type: how its values are stored.
    """

    name: str
    shape: tuple[int, ...]
    tensor_type: GGMLQuantizationType

    @property
    def nbytes(self) -> int:
        block_size, type_size = gguf.GGML_QUANT_SIZES[self.tensor_type]
        return math.prod(self.shape) // block_size * type_size


def tensor_type_for(name: str, shape: tuple[int, ...], file_type: FileType) -> GGMLQuantizationType:
    """What one tensor is stored as in a file of `file_type`, as the converter chooses
    (``ModelBase.prepare_tensors``): 1-D tensors, norms and biases in F32; a row that does not split into
    Q8_0's blocks of 32 in F16 (the converter's fallback on gguf's QuantError); everything else as asked."""
    if len(shape) <= 1 or name.endswith("_norm.weight") or not name.endswith(".weight"):
        return GGMLQuantizationType.F32
    block_size, _ = gguf.GGML_QUANT_SIZES[file_type.tensor_type]
    if shape[-1] % block_size != 0:
        return GGMLQuantizationType.F16
    return file_type.tensor_type


# Same-type copies keep the bytes as they are; the converter's round trip through float32 gives the same.
_SAME_TYPE = {
    GGMLQuantizationType.BF16: torch.bfloat16,
    GGMLQuantizationType.F16: torch.float16,
    GGMLQuantizationType.F32: torch.float32,
}


def encode_rows(rows: torch.Tensor, tensor_type: GGMLQuantizationType) -> numpy.ndarray:
    """Whole rows of a tensor as the bytes of `tensor_type`, rounded as the converter rounds
    (``gguf.quants.quantize`` on float32; Q8_0 blocks run along a row, so rows can be encoded apart).

    `rows` is a [rows, ...] slice of any floating dtype, `tensor_type` F32, F16, BF16 or Q8_0; the bytes
    come back as any numpy dtype (only its buffer is written).
    """
    if _SAME_TYPE.get(tensor_type) == rows.dtype:
        return rows.contiguous().reshape(-1).view(torch.uint8).numpy()
    return gguf.quants.quantize(rows.to(torch.float32).numpy(), tensor_type)


# --- the file -----------------------------------------------------------------------------------


class GGUFFileWriter:
    """Writes one GGUF file: the header first, then each tensor's bytes as they come, in header order.

    The file is written as ``<name>.partial`` and renamed once every tensor is in; on any error it is
    removed. Every byte is hashed on its way out, so the Hub's LFS id (sha256) is known without reading
    the file again.
    """

    def __init__(
        self,
        path: Path,
        architecture: str,
        fields: Sequence[MetadataField],
        tensors: Sequence[TensorLayout],
    ) -> None:
        self.path = path
        self.size = 0
        self.sha256 = ""
        self._partial = path.with_name(path.name + ".partial")
        self._pending = iter(tensors)
        self._remaining = len(tensors)
        self._current: TensorLayout | None = None
        self._current_bytes = 0
        self._hash = hashlib.sha256()
        header = gguf.GGUFWriter(self._partial, architecture)
        for field in fields:
            header.add_key_value(field.key, field.value, field.type, field.sub_type)
        for tensor in tensors:
            header.add_tensor_info(
                tensor.name,
                tensor.shape,
                numpy.dtype(numpy.float32),
                tensor.nbytes,
                raw_dtype=tensor.tensor_type,
            )
        try:
            header.write_header_to_file()
            header.write_kv_data_to_file()
            header.write_ti_data_to_file()
            header.close()
        except BaseException:
            header.close()
            self._partial.unlink(missing_ok=True)
            raise
        self._file = self._partial.open("r+b")
        # The header is small (the vocabulary is its bulk: a few MB); hash it as written, then append.
        self._hash.update(self._file.read())
        self._alignment = header.data_alignment
        self._pad()

    def _write(self, data: bytes | memoryview) -> None:
        self._file.write(data)
        self._hash.update(data)

    def _pad(self) -> None:
        position = self._file.tell()
        self._write(bytes(-position % self._alignment))

    def start_tensor(self, name: str) -> None:
        """Begin the next tensor of the header; its bytes follow through `append`.

        Raises:
            ValueError: another tensor is due, or the previous one is unfinished.
        """
        expected = next(self._pending, None)
        if self._current is not None or expected is None or expected.name != name:
            raise ValueError(f"tensor {name} written out of the header's order")
        self._current, self._current_bytes = expected, 0

    def append(self, chunk: numpy.ndarray) -> None:
        """Append encoded bytes of the tensor being written (whole rows, in order)."""
        data = memoryview(numpy.ascontiguousarray(chunk)).cast("B")
        self._write(data)
        self._current_bytes += len(data)

    def finish_tensor(self) -> None:
        """End the tensor being written, padding the file to the next aligned offset.

        Raises:
            ValueError: its bytes do not add up to the size its header gives.
        """
        if self._current is None or self._current_bytes != self._current.nbytes:
            name = self._current.name if self._current else "?"
            raise ValueError(f"tensor {name}: {self._current_bytes} bytes written, not its header's size")
        self._current = None
        self._remaining -= 1
        self._pad()

    def __enter__(self) -> GGUFFileWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.size = self._file.tell()
        self._file.close()
        if exc_type is None and self._remaining != 0:
            self._partial.unlink()
            raise ValueError(f"{self.path.name}: {self._remaining} tensors of the header were never written")
        if exc_type is None:
            self.sha256 = self._hash.hexdigest()
            os.replace(self._partial, self.path)
        else:
            self._partial.unlink(missing_ok=True)


# The largest JSON file of a model folder: its tokenizer.json (Gemma's 262k tokens write ~33 MB).
MAX_JSON_BYTES = 64_000_000


def read_json(path: Path, *, required: bool) -> dict[str, Any]:
    """A JSON object from a model folder ({} for a missing optional file), read bounded.

    Raises:
        GGUFExportError: a required file is missing, or the file is not a JSON object within the bounds.
    """
    if not path.is_file():
        if required:
            raise GGUFExportError(f"{path.name} is missing from the model folder")
        return {}
    try:
        return parse_json_object(read_bounded(path, MAX_JSON_BYTES), path.name)
    except FileFormatError as e:
        raise GGUFExportError(str(e)) from e


# --- reading a header back ------------------------------------------------------------------------


def header_strings(path: Path, label: str) -> tuple[str, ...]:
    """Every string a GGUF file's header holds, as gguf-py's reader reads it: metadata keys and string
    values (string arrays item by item: the vocabulary, the merges) and tensor names. The file is
    memory-mapped: only the header's pages are read.

    Raises:
        FileFormatError: not a readable GGUF file.
    """
    try:
        reader = gguf.GGUFReader(path, "r")
        strings: list[str] = []
        for name, field in reader.fields.items():
            strings.append(name)
            if field.types and GGUFValueType.STRING in (field.types[0], field.types[-1]):
                value = field.contents()
                strings.extend(value if isinstance(value, list) else [value])
        strings.extend(tensor.name for tensor in reader.tensors)
    except (ValueError, IndexError, UnicodeDecodeError, OSError) as e:
        raise FileFormatError(f"{label} is not a readable GGUF file ({type(e).__name__})") from e
    return tuple(strings)
