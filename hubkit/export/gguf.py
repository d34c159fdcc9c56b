"""A merged model as GGUF files for llama.cpp, Ollama and LM Studio, one file per asked type, streamed.

Two steps, as the merge: `plan_gguf_export` reads only config.json, the tokenizer and the shards'
headers, and makes every check (architecture, tokenizer, tensor names, shapes, types) before anything is
written; `write_gguf` then reads each tensor once, a block of rows at a time, and appends it encoded to
every file being written. Memory stays at one block of rows (``CHUNK_BYTES`` of input and its encodings)
whatever the model's size; only Llama's q/k weights, whose rows are reordered, are held whole.

    plan = plan_gguf_export(Path("merged"), Path("gguf"), ["q8_0", "bf16"], GGUFMetadata(name="run"))
    result = write_gguf(plan)

The k-quants (Q4_K_M, ...) are then made from the BF16 file by llama.cpp's own quantizer
(`hubkit.export.gguf_quantize`); a BF16 file not asked for is written beside them and removed after.

The tensors can also come from elsewhere than the folder's shards, e.g. a merge that streams its output
(`TensorStream`); config.json and the tokenizer are still read from the folder.
"""

from __future__ import annotations

import itertools
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import gguf
import numpy
import torch

from hubkit.errors import GGUFExportError
from hubkit.export.gguf_quantize import quantize, require_quantizer
from hubkit.formats.gguf import (
    SKIPPED_SUFFIXES,
    FileType,
    GGUFFileWriter,
    GGUFMetadata,
    MetadataField,
    TensorLayout,
    choose_gguf_types,
    encode_rows,
    file_types,
    general_fields,
    read_json,
    tensor_type_for,
)
from hubkit.formats.gguf_arch import (
    Architecture,
    architecture_of,
    generated_tensors,
    gguf_name,
    hyperparameter_fields,
    llama_permute,
)
from hubkit.formats.gguf_types import GGUFType
from hubkit.formats.gguf_vocab import vocab_fields
from hubkit.formats.model_config import CONFIG, read_model_config
from hubkit.formats.safetensors import SafetensorsFormatError, SafetensorsHeader, TensorInfo, read_header
from hubkit.merge.shards import TORCH_DTYPES, ShardReader

# Input read and encoded per step: large enough that numpy's per-call costs vanish, small enough that the
# float32 copy and Q8_0's temporaries (about six times the float32 block) stay a few hundred MB.
CHUNK_BYTES = 16 * 1024 * 1024
SHARD_INDEX = "model.safetensors.index.json"

# Called with (bytes of input done, total bytes of input) after each tensor.
ProgressCallback = Callable[[int, int], None]


@dataclass(frozen=True)
class TensorSpec:
    """One tensor a `TensorStream` will yield: its transformers name and shape."""

    name: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class TensorStream:
    """Tensors from another source than the model folder's shards, e.g. a merge streaming its output.

    Attributes:
        specs: every tensor, in the order `tensors` yields them; known before the first one arrives,
            since a GGUF header lists them all.
        tensors: (transformers name, floating-point tensor) pairs, iterated once.
    """

    specs: tuple[TensorSpec, ...]
    tensors: Iterable[tuple[str, torch.Tensor]]


@dataclass(frozen=True)
class SourceTensor:
    """One input tensor and what it becomes."""

    hf_name: str
    gguf_name: str
    shape: tuple[int, ...]
    permute_heads: int | None  # Llama q/k: rows reordered for this many heads


@dataclass(frozen=True)
class PlannedFile:
    """One GGUF file to write: its header, then its tensors in this order."""

    file_type: FileType
    path: Path
    fields: tuple[MetadataField, ...]
    tensors: tuple[TensorLayout, ...]


@dataclass(frozen=True)
class QuantizedFile:
    """One k-quant file, made by llama.cpp's quantizer from the plan's BF16 file."""

    gguf_type: GGUFType
    path: Path


@dataclass(frozen=True)
class GGUFPlan:
    """Everything checked and decided before the first byte of an export is written."""

    architecture: Architecture
    out_dir: Path
    shards: tuple[SafetensorsHeader, ...]  # the folder's shards; empty when `stream` is given
    stream: TensorStream | None
    generated: tuple[tuple[str, numpy.ndarray], ...]  # computed tensors, written first (as the converter)
    sources: tuple[SourceTensor, ...]
    files: tuple[PlannedFile, ...]
    quantized: tuple[QuantizedFile, ...] = ()
    order: tuple[str, ...] = ()  # every asked type's name, in the asked order
    scratch: Path | None = None  # the BF16 file the k-quants are made from, when it was not asked for

    @property
    def input_bytes(self) -> int:
        return sum(info.nbytes for shard in self.shards for info in shard.tensors)


@dataclass(frozen=True)
class GGUFFile:
    """A written GGUF file: its type's name (``Q8_0``), where it is, its size and sha256 (its LFS id)."""

    file_type: str
    path: Path
    size: int
    sha256: str


@dataclass(frozen=True)
class GGUFExport:
    """What `write_gguf` wrote: one file per asked type, in the asked order."""

    architecture: str
    files: tuple[GGUFFile, ...]


def export_gguf(
    model_dir: Path,
    out_dir: Path,
    types: Sequence[str],
    metadata: GGUFMetadata,
    *,
    stream: TensorStream | None = None,
    progress: ProgressCallback | None = None,
) -> GGUFExport:
    """Write a model as GGUF files, one per type: `plan_gguf_export`, then `write_gguf`.

    `model_dir` holds config.json, the tokenizer files, generation_config.json and, unless `stream` is
    given, the safetensors shards; each file goes to ``<out_dir>/<name>-<TYPE>.gguf``, replaced if present;
    `types` are ``bf16``, ``f16``, ``q8_0`` or k-quants (``q4_k_m``, ...; any case).

    Raises:
        GGUFExportError: the model cannot be written as llama.cpp reads it; nothing is written then.
    """
    return write_gguf(plan_gguf_export(model_dir, out_dir, types, metadata, stream=stream), progress)


def plan_gguf_export(
    model_dir: Path,
    out_dir: Path,
    types: Sequence[str],
    metadata: GGUFMetadata,
    *,
    stream: TensorStream | None = None,
) -> GGUFPlan:
    """Check the model and decide every file's header, reading no tensor (see `export_gguf`).

    Raises:
        GGUFExportError: an unknown type or architecture, an unreadable config or tokenizer, missing or
            corrupt shards, a tensor with no GGUF name or of an unsupported dtype; a k-quant without
            llama.cpp's quantizer installed.
    """
    asked = choose_gguf_types(types)
    k_quants = [t for t in asked if t.quantized_by_llama_cpp]
    if k_quants:
        require_quantizer()
    chosen = file_types([t.name for t in asked])
    bf16_asked = any(t.name == "BF16" for t in chosen)
    if k_quants and not bf16_asked:
        chosen = (*chosen, *file_types(["bf16"]))
    model_config = read_model_config(model_dir / CONFIG)
    config, vocab_size = model_config.values, model_config.vocab_size or 0
    architecture = architecture_of(config)
    shards = () if stream is not None else _read_shards(model_dir)
    specs = stream.specs if stream is not None else _shard_specs(shards)
    sources = _plan_sources(specs, architecture, config)
    embeddings = next((s for s in sources if s.gguf_name == "token_embd.weight"), None)
    if embeddings is None or embeddings.shape[0] != vocab_size:
        raise GGUFExportError(
            f"no embedding of {vocab_size} rows (config.json's vocab_size) among the tensors"
        )
    generated = generated_tensors(config, architecture)
    vocab = vocab_fields(model_dir, architecture.name, vocab_size, llama_layout=architecture.llama_layout)
    generation_config = read_json(model_dir / "generation_config.json", required=False)
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", metadata.name).strip("-.") or "model"
    files = []
    scratch = None
    for file_type in chosen:
        layouts = tuple(
            TensorLayout(name, tuple(data.shape), gguf.GGMLQuantizationType.F32) for name, data in generated
        ) + tuple(
            TensorLayout(s.gguf_name, s.shape, tensor_type_for(s.gguf_name, s.shape, file_type))
            for s in sources
        )
        total_params = sum(int(numpy.prod(t.shape)) for t in layouts)
        fields = (
            general_fields(architecture.name, metadata, total_params, generation_config)
            + hyperparameter_fields(config, architecture, file_type)
            + vocab
        )
        path = out_dir / f"{stem}-{file_type.name}.gguf"
        if file_type.name == "BF16" and not bf16_asked:
            path = scratch = out_dir / f"{stem}-BF16.source.gguf"
        files.append(PlannedFile(file_type, path, fields, layouts))
    quantized = tuple(QuantizedFile(t, out_dir / f"{stem}-{t.name}.gguf") for t in k_quants)
    order = tuple(t.name for t in asked)
    return GGUFPlan(
        architecture, out_dir, shards, stream, generated, sources, tuple(files), quantized, order, scratch
    )


def _read_shards(model_dir: Path) -> tuple[SafetensorsHeader, ...]:
    index_path = model_dir / SHARD_INDEX
    if index_path.is_file():
        weight_map = read_json(index_path, required=True).get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise GGUFExportError(f"{SHARD_INDEX} has no weight_map; re-save the model")
        names = sorted(set(weight_map.values()))
    elif (model_dir / "model.safetensors").is_file():
        names, weight_map = ["model.safetensors"], None
    else:
        raise GGUFExportError(f"no safetensors weights in {model_dir.name}: merge the model first")
    shards = []
    for name in names:
        try:
            shards.append(read_header(model_dir / name))
        except SafetensorsFormatError as e:
            raise GGUFExportError(f"shard {e}; merge the model again") from e
    found = {info.name for shard in shards for info in shard.tensors}
    if weight_map is not None and set(weight_map) != found:
        raise GGUFExportError(
            f"the shards do not hold the tensors {SHARD_INDEX} lists; merge the model again"
        )
    for shard in shards:
        for info in shard.tensors:
            if info.dtype not in TORCH_DTYPES:
                raise GGUFExportError(
                    f"tensor {info.name} is {info.dtype}; GGUF export reads F32, F16 and BF16"
                )
    return tuple(shards)


def _shard_specs(shards: Sequence[SafetensorsHeader]) -> tuple[TensorSpec, ...]:
    return tuple(TensorSpec(info.name, info.shape) for shard in shards for info in shard.tensors)


def _plan_sources(
    specs: Sequence[TensorSpec], architecture: Architecture, config: dict[str, object]
) -> tuple[SourceTensor, ...]:
    name_map = gguf.get_tensor_name_map(architecture.arch, int(config.get("num_hidden_layers") or 0))
    sources: list[SourceTensor] = []
    seen: set[str] = set()
    for spec in specs:
        if spec.name.endswith(SKIPPED_SUFFIXES):
            continue
        name = gguf_name(name_map, architecture, spec.name)
        if name in seen:
            raise GGUFExportError(f"two tensors become {name}; the model folder holds duplicate weights")
        seen.add(name)
        module, _, part = spec.name.rpartition(".")
        permute = permuted_heads(architecture, config, module) if part in ("weight", "bias") else None
        sources.append(SourceTensor(spec.name, name, tuple(spec.shape), permute))
    return tuple(sources)


def permuted_heads(architecture: Architecture, config: dict[str, Any], module: str) -> int | None:
    """The heads a Llama-layout q/k projection's rows are reordered for, as llama.cpp's converter does;
    None for any other module."""
    if not architecture.llama_layout:
        return None
    if module.endswith("q_proj"):
        heads = config.get("num_attention_heads")
    elif module.endswith("k_proj"):
        heads = config.get("num_key_value_heads") or config.get("num_attention_heads")
    else:
        return None
    return heads if isinstance(heads, int) else None


def write_gguf(plan: GGUFPlan, progress: ProgressCallback | None = None) -> GGUFExport:
    """Write every planned file in one pass over the tensors, then make the k-quants from the BF16 one.

    This thread reads and encodes (numpy's quantization, which releases the GIL); a writer thread appends
    and hashes what was encoded, one block behind, so that the two overlap. Each file appears complete or
    not at all (written as ``.partial``, renamed at the end).

    Raises:
        GGUFExportError: a streamed tensor is not the one its spec announced.
    """
    plan.out_dir.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        writers = [
            stack.enter_context(GGUFFileWriter(f.path, plan.architecture.name, f.fields, f.tensors))
            for f in plan.files
        ]
        # Entered last, so it is drained before any writer closes (renaming, or removing, its file).
        thread = stack.enter_context(ThreadPoolExecutor(max_workers=1, thread_name_prefix="gguf-write"))
        in_flight: deque[Future[None]] = deque()

        def submit(job: Callable[[], None]) -> None:
            # File operations run in order on one thread. Waiting here until only the newest is left means
            # the read buffer of the block before it is free again (see _READ_BUFFERS).
            in_flight.append(thread.submit(job))
            while len(in_flight) > _READ_BUFFERS - 1:
                in_flight.popleft().result()

        for name, data in plan.generated:
            submit(partial(_write_whole, writers, name, [data] * len(writers)))
        # Per file, the type of each source tensor (generated tensors come first in every file).
        types = [[t.tensor_type for t in f.tensors[len(plan.generated) :]] for f in plan.files]
        done, total = 0, plan.input_bytes
        for index, (source, blocks) in enumerate(_source_blocks(plan)):
            submit(partial(_start, writers, source.gguf_name))
            for rows in blocks:
                encoded = [encode_rows(rows, file_types_[index]) for file_types_ in types]
                submit(partial(_append, writers, encoded))
                done += rows.numel() * rows.element_size()
            submit(partial(_finish, writers))
            if progress:
                progress(done, total or done)  # a stream's input size is known only at its end
        while in_flight:
            in_flight.popleft().result()
    written = {
        f.file_type.name: GGUFFile(f.file_type.name, w.path, w.size, w.sha256)
        for f, w in zip(plan.files, writers, strict=True)
    }
    try:
        for k_quant in plan.quantized:
            size, sha256 = quantize(written["BF16"].path, k_quant.path, k_quant.gguf_type)
            written[k_quant.gguf_type.name] = GGUFFile(k_quant.gguf_type.name, k_quant.path, size, sha256)
    finally:
        if plan.scratch is not None:
            plan.scratch.unlink(missing_ok=True)
    return GGUFExport(architecture=plan.architecture.name, files=tuple(written[t] for t in plan.order))


def _start(writers: Sequence[GGUFFileWriter], name: str) -> None:
    for writer in writers:
        writer.start_tensor(name)


def _append(writers: Sequence[GGUFFileWriter], encoded: Sequence[numpy.ndarray]) -> None:
    for writer, data in zip(writers, encoded, strict=True):
        writer.append(data)


def _finish(writers: Sequence[GGUFFileWriter]) -> None:
    for writer in writers:
        writer.finish_tensor()


def _write_whole(writers: Sequence[GGUFFileWriter], name: str, encoded: Sequence[numpy.ndarray]) -> None:
    _start(writers, name)
    _append(writers, encoded)
    _finish(writers)


# Blocks are read into these buffers in turn. A same-type copy (bf16 to BF16) is written straight from its
# buffer, so a buffer is reused only once the writer thread is done with the block read into it.
_READ_BUFFERS = 2


def _source_blocks(plan: GGUFPlan) -> Iterator[tuple[SourceTensor, Iterator[torch.Tensor]]]:
    """Each source tensor with its blocks of rows, in plan order; the blocks of a tensor must be used
    before the next tensor is asked for, and each block only until `_READ_BUFFERS` blocks later."""
    if plan.stream is not None:
        yield from _stream_blocks(plan)
        return
    sources = iter(plan.sources)
    buffers = [torch.empty(0, dtype=torch.uint8)] * _READ_BUFFERS
    turn = itertools.count()
    for shard in plan.shards:
        with ShardReader(shard) as reader:  # one shard open at a time
            for info in shard.tensors:
                if info.name.endswith(SKIPPED_SUFFIXES):
                    continue
                # A block holds whole rows: at least one, however long a row is.
                row_bytes = info.nbytes // info.shape[0] if len(info.shape) > 1 else info.nbytes
                if buffers[0].numel() < max(CHUNK_BYTES, row_bytes):
                    # Blocks still being written keep the old buffers alive through their views.
                    size = max(CHUNK_BYTES, row_bytes)
                    buffers = [torch.empty(size, dtype=torch.uint8) for _ in range(_READ_BUFFERS)]
                source = next(sources)
                yield source, _shard_rows(reader, info, source, buffers, turn)


def _shard_rows(
    reader: ShardReader,
    info: TensorInfo,
    source: SourceTensor,
    buffers: Sequence[torch.Tensor],
    turn: Iterator[int],
) -> Iterator[torch.Tensor]:
    if source.permute_heads is not None:
        whole = reader.read_tensor(info, torch.empty(info.nbytes, dtype=torch.uint8))
        yield from _blocks(llama_permute(whole, source.permute_heads))
        return
    if len(info.shape) <= 1:
        yield reader.read_tensor(info, buffers[next(turn) % len(buffers)])
        return
    rows = info.shape[0]
    row_bytes = info.nbytes // rows
    step = max(1, CHUNK_BYTES // row_bytes)
    for start in range(0, rows, step):
        count = min(step, rows - start)
        block = TensorInfo(
            info.name,
            info.dtype,
            (count, *info.shape[1:]),
            info.offset + start * row_bytes,
            count * row_bytes,
        )
        yield reader.read_tensor(block, buffers[next(turn) % len(buffers)])


def _stream_blocks(plan: GGUFPlan) -> Iterator[tuple[SourceTensor, Iterator[torch.Tensor]]]:
    assert plan.stream is not None
    sources = iter(plan.sources)
    for name, tensor in plan.stream.tensors:
        if name.endswith(SKIPPED_SUFFIXES):
            continue
        source = next(sources, None)
        if source is None or source.hf_name != name or tuple(tensor.shape) != source.shape:
            expected = f"{source.hf_name} {source.shape}" if source else "no more tensors"
            raise GGUFExportError(
                f"the stream gave {name} {tuple(tensor.shape)} where {expected} was announced"
            )
        if not tensor.is_floating_point():
            raise GGUFExportError(
                f"the stream gave {name} as {tensor.dtype}; GGUF export reads floating point"
            )
        if source.permute_heads is not None:
            tensor = llama_permute(tensor, source.permute_heads)
        yield source, _blocks(tensor.detach().cpu())
    if next(sources, None) is not None:
        raise GGUFExportError("the stream ended before every announced tensor")


def _blocks(tensor: torch.Tensor) -> Iterator[torch.Tensor]:
    if tensor.dim() <= 1:
        yield tensor
        return
    row_bytes = tensor[0].numel() * tensor.element_size()
    step = max(1, CHUNK_BYTES // row_bytes)
    for start in range(0, tensor.shape[0], step):
        yield tensor[start : start + step]
