"""One read of a saved adapter's weights: its data checked and its bytes hashed, and that read remembered.

`scan_weights` reads ``adapter_model.safetensors`` once, in chunks of whole tensors, into reused
buffers. Each chunk is checked in place through numpy views (no NaN/Inf, some lora_B not zero) and
hashed, so memory stays at two chunks whatever the adapter's size. Read alone, an adapter is hashed on
another thread (hashlib releases the GIL) while the next chunk is read and checked; read alongside
others, which keep the cores busy, it is hashed on the reading thread in smaller chunks that are
still in the core's cache (about 15 % less CPU per file). When the saved keys are not PEFT's, or the
saved header holds metadata a push does not publish, the chunks are also written after a rewritten
header (the tensor data is copied byte for byte) and the hash is the new file's.

`VerdictCache` keeps what a passing check found in ``<run_dir>/.hubkit/adapters/``, keyed by the
weights file's version (device, inode, size, mtime) and a digest of everything else the checks read
(the saved config, the run's base model and LoRA settings), so that the next push of an unchanged
checkpoint reads neither its tensors nor its header. `.hubkit/` is never published.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
from collections import deque
from collections.abc import Collection, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

from hubkit.adapters.checks import refuse_non_finite, refuse_untrained
from hubkit.errors import AdapterError
from hubkit.formats.safetensors import (
    FLOAT_LAYOUTS,
    SafetensorsHeader,
    TensorInfo,
    encode_header,
    known_metadata,
)
from hubkit.hub.hashing import EAGER_GIT_SHA1_BYTES, FileHashes, FileVersion
from hubkit.runs.state import ADAPTER_VERDICTS_DIR, keep

logger = logging.getLogger(__name__)

_CACHE_FORMAT = 2
# Chunks of whole tensors up to this size (a bigger tensor gets a chunk of its own): two are in memory
# when another thread hashes them, one when the reading thread does.
CHUNK_BYTES = 4 * 1024 * 1024
SAME_THREAD_CHUNK_BYTES = 1024 * 1024


@functools.cache
def _float_views() -> dict[str, tuple[type | None, type, int, int]]:
    """numpy's views of the float dtypes an adapter may hold (their layouts: `FLOAT_LAYOUTS`).

    numpy is imported on the first tensor read: a push whose adapters are all known reads none.
    """
    import numpy as np

    return {
        name: (
            getattr(np, layout.numpy_name) if layout.numpy_name else None,
            getattr(np, layout.bits),
            layout.exponent_mask,
            layout.sign_bit,
        )
        for name, layout in FLOAT_LAYOUTS.items()
    }


def rewritten_header(header: SafetensorsHeader, names: Mapping[str, str]) -> bytes:
    """The 8-byte length and JSON header to write before the unchanged tensor data of `header`'s file (tensors
    in file order, back to back): its tensors renamed by `names` (old → new, for every tensor) and only the
    metadata libraries read kept (as vetting writes a header: `hubkit.safety.weights`)."""
    renamed = [replace(tensor, name=names[tensor.name]) for tensor in header.tensors]
    return encode_header(renamed, known_metadata(header.metadata))


def _chunks(tensors: tuple[TensorInfo, ...], limit: int) -> list[tuple[TensorInfo, ...]]:
    """Consecutive tensors grouped into chunks of at most `limit` bytes (or one tensor)."""
    chunks: list[tuple[TensorInfo, ...]] = []
    current: list[TensorInfo] = []
    size = 0
    for tensor in tensors:
        if current and size + tensor.nbytes > limit:
            chunks.append(tuple(current))
            current, size = [], 0
        current.append(tensor)
        size += tensor.nbytes
    if current:
        chunks.append(tuple(current))
    return chunks


def _read_exactly(f: BinaryIO, view: memoryview) -> bool:
    """Fill `view` from `f`; False when the file ends first."""
    filled = 0
    while filled < len(view):
        read = f.readinto(view[filled:])  # type: ignore[attr-defined]
        if not read:
            return False
        filled += read
    return True


def _offset_count(chunk: tuple[TensorInfo, ...], tensor: TensorInfo) -> tuple[int, int]:
    """Where a tensor of a chunk starts in the chunk's buffer, and how many values it holds."""
    return tensor.offset - chunk[0].offset, math.prod(tensor.shape)


def _all_finite(buffer: bytearray, dtype: str, offset: int, count: int) -> bool:
    """Whether `count` values of `dtype` at `offset` in `buffer` are all finite, read in place.

    numpy, on this thread only: torch's thread pool would spin against the hashing thread.
    """
    import numpy as np

    float_type, bits_type, exponent, _ = _float_views()[dtype]
    if float_type is not None:
        # A finite sum means every value is finite: NaN and ±Inf propagate through addition. The exact
        # check runs only when the sum is not finite (a diverged adapter, or finite values overflowing).
        with np.errstate(over="ignore", invalid="ignore"):
            if np.isfinite(np.frombuffer(buffer, float_type, count, offset).sum()):
                return True
    bits = np.frombuffer(buffer, bits_type, count, offset)
    return not ((bits & bits_type(exponent)) == bits_type(exponent)).any()


def _any_nonzero(buffer: bytearray, dtype: str, offset: int, count: int) -> bool:
    """Whether any of the values holds something other than +0 or -0."""
    import numpy as np

    _, bits_type, _, sign = _float_views()[dtype]
    return bool((np.frombuffer(buffer, bits_type, count, offset) & bits_type(sign - 1)).any())


def _first_non_finite(buffer: bytearray, chunk: tuple[TensorInfo, ...]) -> TensorInfo | None:
    """The first tensor of a chunk holding NaN or Inf; one check covers a chunk of one dtype."""
    if len({t.dtype for t in chunk}) == 1:
        count = sum(math.prod(t.shape) for t in chunk)
        if _all_finite(buffer, chunk[0].dtype, 0, count):
            return None
    for tensor in chunk:
        if not _all_finite(buffer, tensor.dtype, *_offset_count(chunk, tensor)):
            return tensor
    return None


def scan_weights(
    path: Path,
    header: SafetensorsHeader,
    lora_b: Collection[str],
    label: str,
    *,
    rewrite_to: Path | None = None,
    new_header: bytes | None = None,
    alongside_others: bool = False,
) -> FileHashes:
    """Check every tensor of a safetensors file and hash the file, reading it once.

    Args:
        lora_b: the names of the lora_B tensors (at least one must hold a non-zero value).
        rewrite_to: also write the file here, with `new_header` instead of the saved one.
        new_header: from `rewritten_header`; required with `rewrite_to`.
        alongside_others: other files are being read at the same time: hash on this thread.

    Returns:
        The hashes (sha256, size) of the file as published: the saved one, or the rewritten one.

    Raises:
        AdapterError: a dtype hubkit does not check, a tensor holding NaN or Inf, every lora_B zero, or a
            file that changed or shrank while it was read.
    """
    unknown = sorted({t.dtype for t in header.tensors} - set(FLOAT_LAYOUTS))
    if unknown:
        raise AdapterError(
            f"{label}: the adapter holds {', '.join(unknown)} tensors; LoRA weights are F32, BF16, F16 or F64: "
            "re-save the adapter"
        )
    if (rewrite_to is None) != (new_header is None):
        raise ValueError("rewrite_to and new_header go together")
    chunks = _chunks(header.tensors, SAME_THREAD_CHUNK_BYTES if alongside_others else CHUNK_BYTES)
    biggest = max((sum(t.nbytes for t in c) for c in chunks), default=0)
    buffers = [bytearray(biggest) for _ in range(min(1 if alongside_others else 2, len(chunks)))]
    prefix_size = header.data_start if new_header is None else len(new_header)
    total = prefix_size + sum(t.nbytes for t in header.tensors)
    sha256 = hashlib.sha256()
    # A small file may be stored as a regular file, named by its git blob sha1: hashed in the same read.
    git = hashlib.sha1(f"blob {total}\0".encode()) if total < EAGER_GIT_SHA1_BYTES else None
    size = 0
    b_nonzero = False
    lora_b = frozenset(lora_b)
    with ExitStack() as stack:
        f = stack.enter_context(path.open("rb", buffering=0))
        out = stack.enter_context(rewrite_to.open("wb")) if rewrite_to is not None else None
        hasher = (
            None
            if alongside_others
            else stack.enter_context(ThreadPoolExecutor(max_workers=1, thread_name_prefix="hubkit-hash"))
        )
        if new_header is None:
            prefix = f.read(header.data_start)
        else:
            f.seek(header.data_start)
            prefix = new_header

        def consume(data: memoryview | bytes) -> None:  # chunks in file order
            sha256.update(data)
            if git is not None:
                git.update(data)
            if out is not None:
                out.write(data)

        pending: deque[Future[None]] = deque()

        def hand_on(data: memoryview | bytes) -> None:
            if hasher is None:
                consume(data)
            else:
                pending.append(hasher.submit(consume, data))

        hand_on(prefix)
        size += len(prefix)
        for number, chunk in enumerate(chunks):
            buffer = buffers[number % len(buffers)]
            while len(pending) > 1:  # the chunk that used this buffer before must be hashed first
                pending.popleft().result()
            view = memoryview(buffer)[: sum(t.nbytes for t in chunk)]
            if not _read_exactly(f, view):
                raise AdapterError(f"{label}: {path.name} shrank while it was read (still being saved?)")
            hand_on(view)
            size += len(view)
            bad = _first_non_finite(buffer, chunk)
            if bad is not None:
                refuse_non_finite(label, bad.name)
            if not b_nonzero:
                b_nonzero = any(
                    _any_nonzero(buffer, t.dtype, *_offset_count(chunk, t)) for t in chunk if t.name in lora_b
                )
        for future in pending:
            future.result()
    if lora_b and not b_nonzero:
        refuse_untrained(label)
    if size != total:
        raise AdapterError(f"{label}: {path.name} changed while it was read (still being saved?)")
    return FileHashes(size=size, sha256=sha256.hexdigest(), git_sha1=git.hexdigest() if git else None)


@dataclass(frozen=True)
class Verdict:
    """What the checks of a saved adapter found when it passed them."""

    hashes: FileHashes  # of its weights file
    num_modules: int


class VerdictCache:
    """Passing checks of a run's saved adapters, in ``<run_dir>/.hubkit/adapters/`` (one file per adapter).

    Args:
        run_dir: the run directory; an unwritable one just keeps nothing.
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)

    def _entry(self, weights: Path) -> Path:
        # Named by a hash: a checkpoint's path holds characters that do not belong in one file name.
        try:
            key = str(weights.absolute().relative_to(self.run_dir.absolute()))
        except ValueError:
            key = str(weights.absolute())
        return self.run_dir / ADAPTER_VERDICTS_DIR / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"

    def get(self, weights: Path, version: FileVersion, inputs: str) -> Verdict | None:
        """The verdict of this version of `weights` checked with these `inputs` (a digest), or None."""
        try:
            entry = json.loads(self._entry(weights).read_text())
            if (
                entry["format"] != _CACHE_FORMAT
                or FileVersion(**entry["version"]) != version
                or entry["inputs"] != inputs
            ):
                return None
            hashes = FileHashes(size=version.size, sha256=entry["sha256"], git_sha1=entry["git_sha1"])
            return Verdict(hashes=hashes, num_modules=int(entry["num_modules"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, weights: Path, version: FileVersion, inputs: str, verdict: Verdict) -> None:
        """Record that this version of `weights`, checked with these `inputs`, passed."""
        entry = {
            "format": _CACHE_FORMAT,
            "version": {
                "device": version.device,
                "inode": version.inode,
                "size": version.size,
                "mtime_ns": version.mtime_ns,
            },
            "inputs": inputs,
            "sha256": verdict.hashes.sha256,
            "git_sha1": verdict.hashes.git_sha1,
            "num_modules": verdict.num_modules,
            "checked": "config, header, pairs and ranks, targets, alpha; every tensor finite, some lora_B not zero",
        }
        keep(self._entry(weights), json.dumps(entry, indent=1) + "\n", "an adapter's checks")
