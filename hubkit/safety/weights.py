"""Safetensors files vetted by their header only: its strings scanned, its metadata cut to known keys.

The tensor data are not read here (they are checked and hashed in the one read `hubkit.adapters.weights_read`
makes of an adapter): the push bench reads ten 132 MB adapters, and each must be read once. What is
vetted is the header, and what is published is a header written from what was read: when the saved
header equals it byte for byte (what `safetensors` writes, with only known metadata), the saved file is
published as it is; otherwise the new header goes before the unchanged tensor data.

``__metadata__`` keeps only ``format`` (what `safetensors` and transformers read), with one of the values
the libraries write; anything else there (a token, the path training ran in) is dropped.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace
from pathlib import Path

from hubkit.errors import FileFormatError, FileTooLargeError
from hubkit.formats.json_file import too_large
from hubkit.formats.safetensors import (
    SafetensorsFormatError,
    SafetensorsHeader,
    encode_header,
    known_metadata,
    read_header,
)

# A 70B model shard's header is ~100 KB, a LoRA adapter's a few tens: anything far larger is not a header.
MAX_HEADER_BYTES = 16 * 1_000_000


@dataclass(frozen=True)
class VettedHeader:
    """A safetensors file's vetted header.

    Attributes:
        header: the parsed header (tensors and the cleaned metadata).
        prefix: the length and JSON header to publish before the tensor data.
        saved_prefix_kept: the saved file starts with exactly `prefix`: it may be published as it is.
        tensor_names: the tensors' names (published: they are scanned).
        metadata_strings: the kept metadata's keys and values (published: scanned too).
        dropped: the metadata keys dropped.
    """

    header: SafetensorsHeader
    prefix: bytes
    saved_prefix_kept: bool
    tensor_names: tuple[str, ...]
    metadata_strings: tuple[str, ...]
    dropped: tuple[str, ...]

    @property
    def published_size(self) -> int:
        return len(self.prefix) + sum(t.nbytes for t in self.header.tensors)


def vet_header(path: Path, max_bytes: int, name: str) -> VettedHeader:
    """Read and vet a safetensors file's header (no tensor data is read). `path` is a regular file (symlinks
    are resolved before); `max_bytes` is checked from its size.

    Raises:
        FileTooLargeError: the file or its header is larger than allowed.
        FileFormatError: not a complete, valid safetensors file.
    """
    size = path.stat().st_size
    if size > max_bytes:
        raise too_large(name, size, max_bytes)
    with path.open("rb") as f:
        prefix = f.read(8)
    if len(prefix) < 8:
        raise FileFormatError(f"{name}: not a safetensors file ({size} bytes)")
    (header_len,) = struct.unpack("<Q", prefix)
    if header_len > MAX_HEADER_BYTES:
        raise FileTooLargeError(
            f"{name}: its header says {header_len} bytes, more than a safetensors header holds"
        )
    try:
        header = read_header(path)
    except SafetensorsFormatError as e:
        raise FileFormatError(f"{name}: not a valid safetensors file ({e})") from e
    except RecursionError as e:  # the header's JSON nested past the parser's bound
        raise FileFormatError(f"{name}: not a valid safetensors file (its header is nested too deep)") from e
    except (TypeError, ValueError) as e:  # a __metadata__ that is not an object
        raise FileFormatError(
            f"{name}: not a valid safetensors file (its __metadata__ is not an object)"
        ) from e
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in header.metadata.items()):
        raise FileFormatError(
            f"{name}: not a valid safetensors file (its __metadata__ maps strings to strings)"
        )
    with path.open("rb") as f:
        saved = f.read(header.data_start)
    metadata = known_metadata(header.metadata)
    new_prefix = encode_header(header.tensors, metadata)  # as `safetensors` writes it
    return VettedHeader(
        header=replace(header, metadata=metadata),
        prefix=new_prefix,
        saved_prefix_kept=saved == new_prefix,
        tensor_names=tuple(t.name for t in header.tensors),
        # Only what is published is scanned: dropped metadata never leaves the machine.
        metadata_strings=tuple(s for item in metadata.items() for s in item),
        dropped=tuple(sorted(set(header.metadata) - set(metadata))),
    )
