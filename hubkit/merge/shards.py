"""Tensor-by-tensor safetensors reading and writing, with no whole shard in memory.

The safetensors format is an 8-byte little-endian header length, a JSON header naming each tensor's
dtype, shape and byte range, then the raw bytes. Reading seeks to one tensor's bytes; writing puts the
header first (every tensor's size is known in advance) and then streams the bytes in header order.
Plain reads are used on purpose: memory-mapped pages count towards the resident set size.
"""

from __future__ import annotations

import errno
import json
import os
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import numpy
import torch

from hubkit.errors import MergeError

# Bytes per element of the safetensors dtypes whose size can be checked against the shape.
DTYPE_SIZES: dict[str, int] = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2,
    "I64": 8, "I32": 4, "I16": 2, "I8": 1,
    "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1,
    "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
}  # fmt: skip

# The floating-point dtypes a LoRA delta can be merged into (quantized weights cannot).
TORCH_DTYPES: dict[str, torch.dtype] = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}

# A header larger than this is not a real checkpoint header (safetensors itself caps it at 100 MB).
MAX_HEADER_BYTES = 100_000_000
COPY_CHUNK_BYTES = 16 * 1024 * 1024
# What copy_file_range answers where a kernel or file system does not support it.
_COPY_UNSUPPORTED = (errno.ENOSYS, errno.EXDEV, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM)

if sys.byteorder != "little":  # safetensors stores little-endian bytes; torch.frombuffer does not swap.
    raise ImportError("hubkit.merge needs a little-endian machine")


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a shard: its name, dtype, shape and where its bytes lie in the file."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    offset: int  # absolute position of the first byte in the file
    nbytes: int


@dataclass(frozen=True)
class ShardHeader:
    """The parsed header of one safetensors file; tensors are in file order."""

    path: Path
    tensors: tuple[TensorInfo, ...]
    metadata: dict[str, str]

    def by_name(self) -> dict[str, TensorInfo]:
        return {t.name: t for t in self.tensors}


def read_header(path: Path) -> ShardHeader:
    """Parse and check a safetensors header without reading any tensor bytes.

    Args:
        path: the safetensors file.

    Returns:
        The header, with absolute byte offsets, tensors sorted by offset.

    Raises:
        MergeError: the file is missing, truncated, or its header is not valid safetensors.
    """
    try:
        file_size = path.stat().st_size
        with path.open("rb") as f:
            prefix = f.read(8)
            if len(prefix) < 8:
                raise MergeError(
                    f"{path.name} is not a safetensors file (shorter than 8 bytes); re-download it"
                )
            (header_len,) = struct.unpack("<Q", prefix)
            if header_len > min(MAX_HEADER_BYTES, file_size - 8):
                raise MergeError(
                    f"{path.name} has a corrupt safetensors header (length {header_len}); re-download it"
                )
            raw = json.loads(f.read(header_len))
    except FileNotFoundError as e:
        raise MergeError(f"base shard {path.name} is missing; re-download the base model") from e
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise MergeError(f"{path.name} has a corrupt safetensors header ({e}); re-download it") from e
    if not isinstance(raw, dict):
        raise MergeError(f"{path.name} has a corrupt safetensors header (not a JSON object); re-download it")
    data_start = 8 + header_len
    metadata = raw.pop("__metadata__", None) or {}
    tensors = [_tensor_info(path, name, entry, data_start) for name, entry in raw.items()]
    tensors.sort(key=lambda t: t.offset)
    position = data_start
    for t in tensors:
        if t.offset != position:
            raise MergeError(f"{path.name} has overlapping or gapped tensor data at {t.name}; re-download it")
        position += t.nbytes
    if position != file_size:
        raise MergeError(
            f"{path.name} is {file_size} bytes but its header describes {position}: the file is truncated "
            "or corrupt; re-download it"
        )
    return ShardHeader(path=path, tensors=tuple(tensors), metadata=dict(metadata))


def _tensor_info(path: Path, name: str, entry: object, data_start: int) -> TensorInfo:
    try:
        dtype = entry["dtype"]  # type: ignore[index]
        shape = tuple(int(d) for d in entry["shape"])  # type: ignore[index]
        begin, end = (int(o) for o in entry["data_offsets"])  # type: ignore[index]
    except (TypeError, KeyError, ValueError) as e:
        raise MergeError(f"{path.name} has a corrupt header entry for {name}; re-download it") from e
    nbytes = end - begin
    numel = 1
    for d in shape:
        numel *= d
    if begin < 0 or nbytes < 0 or (dtype in DTYPE_SIZES and nbytes != numel * DTYPE_SIZES[dtype]):
        raise MergeError(f"{path.name} has a corrupt header entry for {name}; re-download it")
    return TensorInfo(name=name, dtype=dtype, shape=shape, offset=data_start + begin, nbytes=nbytes)


class ShardReader:
    """Reads single tensors from one open safetensors file, each from its own byte range."""

    def __init__(self, header: ShardHeader) -> None:
        self.header = header
        self._file = header.path.open("rb", buffering=0)

    def read_tensor(self, info: TensorInfo, scratch: torch.Tensor) -> torch.Tensor:
        """Read one floating-point tensor (F32, F16 or BF16) into the start of `scratch`.

        Reads at explicit offsets, so one thread may read while another copies from the same shard.

        Args:
            info: the tensor, from this shard's header.
            scratch: a uint8 buffer of at least `info.nbytes`, reused from tensor to tensor: a fresh
                allocation per tensor would fault in new memory pages every time.

        Returns:
            The tensor, a view of `scratch` valid until the next read into it.
        """
        tensor = scratch[: info.nbytes].view(TORCH_DTYPES[info.dtype]).view(info.shape)
        buffer = memoryview(_byte_view(tensor))
        done = 0
        while done < len(buffer):
            n = os.preadv(self._file.fileno(), [buffer[done:]], info.offset + done)
            if n == 0:
                raise MergeError(f"{self.header.path.name} ended early while reading; re-download it")
            done += n
        return tensor

    def fileno(self) -> int:
        return self._file.fileno()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> ShardReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ShardWriter:
    """Writes one safetensors file tensor by tensor, to `<name>.partial`, renamed on success.

    The header is written first from the tensor list given up front, so each tensor's bytes can be
    streamed to disk as soon as they exist; tensors must then be written in that order.
    """

    def __init__(self, path: Path, tensors: list[TensorInfo], metadata: dict[str, str]) -> None:
        self.path = path
        self._partial = path.with_name(path.name + ".partial")
        self._pending: Iterator[TensorInfo] = iter(tensors)
        self._remaining = len(tensors)
        self._fd = os.open(self._partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        _write_all(self._fd, _encode_header(tensors, metadata))

    def _next(self, name: str, nbytes: int) -> None:
        expected = next(self._pending, None)
        if expected is None or expected.name != name or expected.nbytes != nbytes:
            raise ValueError(f"tensor {name} ({nbytes} bytes) written out of the header's order")
        self._remaining -= 1

    def write_tensor(self, name: str, tensor: torch.Tensor) -> None:
        """Append one tensor's bytes (it must be the next one in the header)."""
        data = _byte_view(tensor.contiguous())
        self._next(name, data.nbytes)
        _write_all(self._fd, memoryview(data))

    def copy_tensor(self, name: str, reader: ShardReader, info: TensorInfo) -> None:
        """Append one tensor's bytes straight from another shard, without decoding them."""
        self._next(name, info.nbytes)
        _copy_range(reader, info.offset, info.nbytes, self._fd)

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        os.close(self._fd)
        if exc_type is None and self._remaining != 0:
            self._partial.unlink()
            raise ValueError(f"{self.path.name}: {self._remaining} tensors of the header were never written")
        if exc_type is None:
            os.replace(self._partial, self.path)
        else:
            self._partial.unlink(missing_ok=True)


def _encode_header(tensors: list[TensorInfo], metadata: dict[str, str]) -> bytes:
    header: dict[str, object] = {"__metadata__": metadata} if metadata else {}
    position = 0
    for t in tensors:
        header[t.name] = {
            "dtype": t.dtype,
            "shape": list(t.shape),
            "data_offsets": [position, position + t.nbytes],
        }
        position += t.nbytes
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # safetensors pads the header so that data starts 8-byte aligned
    return struct.pack("<Q", len(encoded)) + encoded


def _byte_view(tensor: torch.Tensor) -> numpy.ndarray:
    """The tensor's bytes as a uint8 array sharing its memory (a buffer that os.write and preadv take)."""
    return tensor.reshape(-1).view(torch.uint8).numpy()


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data).cast("B")
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _copy_range(reader: ShardReader, offset: int, length: int, out_fd: int) -> None:
    """Copy bytes file to file in the kernel (copy_file_range), or in chunks where it is unsupported."""
    in_fd = reader.fileno()
    end = offset + length
    try:
        while offset < end:
            copied = os.copy_file_range(in_fd, out_fd, end - offset, offset)
            if copied == 0:
                raise MergeError(f"{reader.header.path.name} ended early while copying; re-download it")
            offset += copied
        return
    except OSError as e:
        if e.errno not in _COPY_UNSUPPORTED:
            raise
    # copy_file_range is not available here: copy the rest through a buffer.
    buffer = bytearray(min(COPY_CHUNK_BYTES, end - offset))
    while offset < end:
        chunk = memoryview(buffer)[: min(len(buffer), end - offset)]
        n = os.preadv(in_fd, [chunk], offset)
        if n == 0:
            raise MergeError(f"{reader.header.path.name} ended early while copying; re-download it")
        _write_all(out_fd, chunk[:n])
        offset += n
