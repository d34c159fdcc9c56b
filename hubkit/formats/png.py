"""PNG images, read chunk by chunk: the chunks that make up the image kept, every other chunk dropped.

A PNG is an 8-byte signature, then chunks of (4-byte length, 4-byte type, data, CRC-32 of type and
data), from IHDR to IEND. Text chunks (tEXt, zTXt, iTXt), EXIF and the like can hold anything (a
path, a prompt, a key) and show nothing: a card's images keep only what draws them.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

from hubkit.errors import FileFormatError

SIGNATURE = b"\x89PNG\r\n\x1a\n"
# The image itself and how to show it. Text chunks, EXIF and the rest are dropped.
KEPT_CHUNKS = frozenset(
    {b"IHDR", b"PLTE", b"IDAT", b"IEND", b"tRNS", b"gAMA", b"cHRM", b"sRGB", b"pHYs", b"bKGD", b"sBIT"}
)


@dataclass(frozen=True)
class Png:
    """A PNG image as its kept chunks write it, and what was dropped on the way.

    Attributes:
        data: the signature and the kept chunks, unchanged, in their order.
        dropped: the types of the chunks dropped (e.g. "tEXt"), sorted.
        trailing: the file held bytes after its IEND chunk (dropped too).
    """

    data: bytes = field(repr=False)
    dropped: tuple[str, ...]
    trailing: bool


def read_png(data: bytes, name: str) -> Png:
    """Read a PNG chunk by chunk, every length and checksum checked, and keep its image chunks.

    Raises:
        FileFormatError: not a PNG, truncated, a wrong length or checksum, no IHDR first, or a critical
            chunk this reader does not know (an image it cannot vouch for).
    """
    if not data.startswith(SIGNATURE):
        raise FileFormatError(f"{name}: not a PNG image")
    kept, dropped, position = [SIGNATURE], set(), len(SIGNATURE)
    while True:
        if position + 12 > len(data):
            raise FileFormatError(f"{name}: a truncated PNG image (no IEND chunk)")
        length, chunk_type = struct.unpack(">I4s", data[position : position + 8])
        end = position + 12 + length
        body = data[position + 4 : position + 8 + length]
        if end > len(data) or zlib.crc32(body) != int.from_bytes(data[end - 4 : end], "big"):
            raise FileFormatError(f"{name}: a corrupt PNG image (a chunk's length or checksum is wrong)")
        if position == len(SIGNATURE) and chunk_type != b"IHDR":
            raise FileFormatError(f"{name}: a PNG image must start with its IHDR chunk")
        if chunk_type in KEPT_CHUNKS:
            kept.append(data[position:end])
        elif not chunk_type[0] & 0x20:  # a critical chunk (upper-case first letter) not known here
            raise FileFormatError(f"{name}: a PNG image with an unknown critical chunk")
        else:
            dropped.add(chunk_type.decode("latin-1"))
        position = end
        if chunk_type == b"IEND":
            break
    return Png(data=b"".join(kept), dropped=tuple(sorted(dropped)), trailing=position != len(data))
