"""Tensor-by-tensor safetensors reading and writing, with no whole shard in memory.

The safetensors format is an 8-byte little-endian header length, a JSON header naming each tensor's
dtype, shape and byte range, then the raw bytes. Reading seeks to one tensor's bytes; writing puts the
header first (every tensor's size is known in advance) and then streams the bytes in header order.
Plain reads are used on purpose: memory-mapped pages count towards the resident set size.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

import numpy
import torch

from hubkit.errors import MergeError
from hubkit.formats.safetensors import (
    FLOAT_LAYOUTS,
    SafetensorsFormatError,
    SafetensorsHeader,
    TensorInfo,
    encode_header,
    read_header,
)

# The floating-point dtypes a LoRA delta can be merged into (quantized weights cannot).
TORCH_DTYPES: dict[str, torch.dtype] = {
    name: getattr(torch, FLOAT_LAYOUTS[name].torch_name) for name in ("F32", "F16", "BF16")
}

COPY_CHUNK_BYTES = 16 * 1024 * 1024
# What copy_file_range answers where a kernel or file system does not support it.
_COPY_UNSUPPORTED = (errno.ENOSYS, errno.EXDEV, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM)

if sys.byteorder != "little":  # safetensors stores little-endian bytes; torch.frombuffer does not swap.
    raise ImportError("hubkit.merge needs a little-endian machine")


def read_shard_header(path: Path) -> SafetensorsHeader:
    """A base shard's header (see `hubkit.formats.safetensors.read_header`).

    Raises:
        MergeError: the shard is missing, truncated or corrupt.
    """
    try:
        return read_header(path)
    except SafetensorsFormatError as e:
        raise MergeError(f"base shard {e}; re-download the base model") from e


class ShardReader:
    """Reads single tensors from one open safetensors file, each from its own byte range."""

    def __init__(self, header: SafetensorsHeader) -> None:
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
        _write_all(self._fd, encode_header(tensors, metadata))

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
