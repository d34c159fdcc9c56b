"""The safetensors format: the one header reader and the one header writer hubkit uses, for adapters
and for base model shards alike, and the one table of its dtypes.

The format is an 8-byte little-endian header length, a JSON header naming each tensor's dtype, shape
and byte range, then the raw bytes. Reading the header tells whether a file is complete (its size must
equal the header's last byte) without reading any tensor.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from hubkit.errors import HubkitError

# Bytes per element of the safetensors dtypes whose size can be checked against the shape.
DTYPE_SIZES: dict[str, int] = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2,
    "I64": 8, "I32": 4, "I16": 2, "I8": 1,
    "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1,
    "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
}  # fmt: skip


@dataclass(frozen=True)
class FloatLayout:
    """How one floating-point dtype is stored: what checks read its bits with, and what torch calls it.

    Args:
        torch_name: the `torch` dtype attribute (``torch.bfloat16``).
        numpy_name: numpy's float type of the same layout, or None where numpy has none (F16 sums too
            narrowly to be useful, BF16 does not exist in numpy).
        bits: numpy's unsigned integer of the same width.
        exponent_mask: the exponent bits, all set for Inf and NaN only.
        sign_bit: the sign bit.
    """

    torch_name: str
    numpy_name: str | None
    bits: str
    exponent_mask: int
    sign_bit: int


FLOAT_LAYOUTS: dict[str, FloatLayout] = {
    "F64": FloatLayout("float64", "float64", "uint64", 0x7FF0_0000_0000_0000, 1 << 63),
    "F32": FloatLayout("float32", "float32", "uint32", 0x7F80_0000, 1 << 31),
    "F16": FloatLayout("float16", None, "uint16", 0x7C00, 1 << 15),
    "BF16": FloatLayout("bfloat16", None, "uint16", 0x7F80, 1 << 15),
}

# A header larger than this is not a real checkpoint header (safetensors itself caps it at 100 MB).
MAX_HEADER_BYTES = 100_000_000
# The ``__metadata__`` keys the libraries read, with the values each may hold: `format`, which
# transformers checks when it loads a shard. Any other key is for people, and may hold anything.
KNOWN_METADATA: dict[str, frozenset[str]] = {"format": frozenset({"pt", "tf", "flax", "np", "mlx", "paddle"})}


def known_metadata(metadata: Mapping[str, object]) -> dict[str, str]:
    """The ``__metadata__`` entries with a known key and one of its known values, in their order."""
    return {
        key: value  # type: ignore[misc]
        for key, value in metadata.items()
        if key in KNOWN_METADATA and value in KNOWN_METADATA[key]
    }


class SafetensorsFormatError(HubkitError):
    """A safetensors file is missing, truncated or has a corrupt header.

    The message names the file and the defect; callers add what to do (re-save a checkpoint,
    re-download a base shard) by raising their own error from it.
    """


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a file: its name, dtype, shape and where its bytes lie in the file."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    offset: int  # absolute position of the first byte in the file
    nbytes: int

    def dim(self) -> int:
        """Its number of dimensions, as a tensor's ``dim()``: shapes are checked from the header alone."""
        return len(self.shape)


@dataclass(frozen=True)
class SafetensorsHeader:
    """The parsed header of one safetensors file; tensors are in file order."""

    path: Path
    tensors: tuple[TensorInfo, ...]
    metadata: dict[str, str]

    def by_name(self) -> dict[str, TensorInfo]:
        return {t.name: t for t in self.tensors}

    @property
    def data_start(self) -> int:
        return self.tensors[0].offset if self.tensors else self.path.stat().st_size


def read_header(path: Path) -> SafetensorsHeader:
    """A safetensors header, parsed and checked without reading any tensor bytes (absolute byte offsets,
    tensors sorted by offset).

    Raises:
        SafetensorsFormatError: the file is missing, truncated, or its header is not valid safetensors.
    """
    try:
        file_size = path.stat().st_size
        with path.open("rb") as f:
            prefix = f.read(8)
            if len(prefix) < 8:
                raise SafetensorsFormatError(f"{path.name} is truncated ({file_size} bytes)")
            (header_len,) = struct.unpack("<Q", prefix)
            if header_len > min(MAX_HEADER_BYTES, file_size - 8):
                raise SafetensorsFormatError(
                    f"{path.name} is truncated or corrupt (its header length {header_len} runs past the end "
                    f"of the {file_size}-byte file)"
                )
            raw = json.loads(f.read(header_len))
    except FileNotFoundError as e:
        raise SafetensorsFormatError(f"{path.name} is missing") from e
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SafetensorsFormatError(f"{path.name} has a corrupt header ({e})") from e
    if not isinstance(raw, dict):
        raise SafetensorsFormatError(f"{path.name} has a corrupt header (not a JSON object)")
    data_start = 8 + header_len
    metadata = raw.pop("__metadata__", None) or {}
    tensors = [_tensor_info(path, name, entry, data_start) for name, entry in raw.items()]
    tensors.sort(key=lambda t: t.offset)
    position = data_start
    for t in tensors:
        if t.offset != position:
            raise SafetensorsFormatError(f"{path.name} has overlapping or gapped tensor data at {t.name}")
        position += t.nbytes
    if position != file_size:
        raise SafetensorsFormatError(
            f"{path.name} is truncated or corrupt ({file_size} bytes, its header describes {position})"
        )
    return SafetensorsHeader(path=path, tensors=tuple(tensors), metadata=dict(metadata))


def _tensor_info(path: Path, name: str, entry: object, data_start: int) -> TensorInfo:
    try:
        dtype = entry["dtype"]  # type: ignore[index]
        shape = tuple(int(d) for d in entry["shape"])  # type: ignore[index]
        begin, end = (int(o) for o in entry["data_offsets"])  # type: ignore[index]
    except (TypeError, KeyError, ValueError) as e:
        raise SafetensorsFormatError(f"{path.name} has a corrupt header entry for {name}") from e
    nbytes = end - begin
    if begin < 0 or nbytes < 0 or (dtype in DTYPE_SIZES and nbytes != math.prod(shape) * DTYPE_SIZES[dtype]):
        raise SafetensorsFormatError(f"{path.name} has a corrupt header entry for {name}")
    return TensorInfo(name=name, dtype=dtype, shape=shape, offset=data_start + begin, nbytes=nbytes)


def encode_header(tensors: Iterable[TensorInfo], metadata: Mapping[str, str] | None = None) -> bytes:
    """The 8-byte length and the JSON header of a file holding `tensors` back to back, in that order, padded
    so that the data starts 8-byte aligned (as the safetensors library writes it); no ``__metadata__`` when
    `metadata` is empty.

    Only the tensors' names, dtypes, shapes and sizes are used (their offsets are laid out anew).
    """
    header: dict[str, object] = {"__metadata__": dict(metadata)} if metadata else {}
    position = 0
    for t in tensors:
        header[t.name] = {
            "dtype": t.dtype,
            "shape": list(t.shape),
            "data_offsets": [position, position + t.nbytes],
        }
        position += t.nbytes
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    return struct.pack("<Q", len(encoded)) + encoded
