"""Passing vettings remembered by content, so that a push of files vetted before vets none of them again.

    known = KnownVerdicts.in_run(run_dir, context.key())     # <run_dir>/.hubkit/vetted/
    vetted = vet_file(path, kinds.TOKENIZER, context, known=known)

A verdict is found by a digest of everything that decides it: the kind, the sha256 of the bytes read,
the push's context (`VetContext.key`: base model id, run directory, caches, home, a hash of the token)
and the vetting's own code (hubkit's safety and formats sources, and the installed parsers they call).
The bytes are always read, within their kind's bound, and hashed: a file changed since it was vetted
has another digest and is vetted again. Only a file that passed is remembered, with its notes and, when
vetting wrote other bytes than it read, those bytes (checked against their sha256 when taken back).
Losing an entry costs a vetting, never a wrong push (`hubkit.runs.state`): the folder keeps the newest
`KEPT_VERDICTS` (files whose content changes at every push, the metrics of a run still training, add one
each time).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path

from hubkit.runs.state import VETTED_DIR, keep
from hubkit.safety.kinds import Kind

_FORMAT = 1
KEPT_VERDICTS = 4096
# What a validator may call besides hubkit: an upgrade of one of them may change what it accepts or writes.
_PARSERS = ("tokenizers", "jinja2", "yaml", "pyarrow", "huggingface_hub", "google_crc32c", "tensorboard")


@functools.cache
def _code_digest() -> str:
    """A digest of the vetting's code as installed: hubkit's sources it runs, and each parser's version
    on disk (its package's `__init__` size and mtime, which an install of another version changes)."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256(f"{_FORMAT}\0".encode())
    sources = [*sorted((package / "safety").glob("*.py")), *sorted((package / "formats").glob("*.py"))]
    for source in [*sources, package / "runs" / "manifest.py", package / "errors.py"]:
        digest.update(f"{source.relative_to(package)}\0".encode())
        digest.update(source.read_bytes())
    for name in _PARSERS:
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
        stat = os.stat(origin) if origin else None
        digest.update(
            f"{name}\0{stat.st_size if stat else -1}\0{stat.st_mtime_ns if stat else -1}\0".encode()
        )
    return digest.hexdigest()


@dataclass(frozen=True)
class Known:
    """A remembered verdict: what vetting wrote (None: the bytes read), their sha256, and its notes."""

    written: bytes | None
    sha256: str
    notes: tuple[str, ...]


class KnownVerdicts:
    """The passing vettings kept in one folder, for one vetting context.

    Args:
        folder: where they are kept (a run's ``.hubkit/vetted/``); an unwritable one keeps nothing.
        context_key: `VetContext.key` of the push.
    """

    def __init__(self, folder: Path, context_key: str) -> None:
        self.folder = folder
        self._context_key = context_key
        self._pruned = False

    @classmethod
    def in_run(cls, run_dir: Path, context_key: str) -> KnownVerdicts:
        """The verdicts kept in `run_dir`'s ``.hubkit/vetted/``."""
        return cls(Path(run_dir) / VETTED_DIR, context_key)

    def _key(self, kind: Kind, read_sha256: str) -> str:
        parts = (_code_digest(), self._context_key, kind.name, read_sha256)
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()

    def get(self, kind: Kind, read_sha256: str) -> Known | None:
        """What vetting the bytes of this sha256 as `kind` in this context found when they passed, or None."""
        key = self._key(kind, read_sha256)
        try:
            entry = json.loads((self.folder / f"{key}.json").read_text(encoding="utf-8"))
            notes = tuple(str(note) for note in entry["notes"])
            if entry["written_sha256"] is None:
                return Known(None, read_sha256, notes)
            written = (self.folder / f"{key}.bin").read_bytes()
            sha256 = hashlib.sha256(written).hexdigest()
            return Known(written, sha256, notes) if sha256 == entry["written_sha256"] else None
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, kind: Kind, read_sha256: str, written: bytes | None, notes: tuple[str, ...]) -> None:
        """Remember that the bytes of this sha256, vetted as `kind` in this context, passed and became
        `written` (None: themselves)."""
        key = self._key(kind, read_sha256)
        if written is not None and not keep(self.folder / f"{key}.bin", written, "what vetting wrote"):
            return
        entry = {
            "written_sha256": None if written is None else hashlib.sha256(written).hexdigest(),
            "notes": list(notes),
        }
        keep(self.folder / f"{key}.json", json.dumps(entry) + "\n", "a vetting's verdict")
        if not self._pruned:  # once per session: a push that vets anything new looks at the folder once
            self._pruned = True
            self._prune()

    def _prune(self) -> None:
        """Drop the oldest entries beyond `KEPT_VERDICTS` (a kept rewrite with its entry)."""
        try:
            entries = sorted(self.folder.glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
            for entry in entries[: max(len(entries) - KEPT_VERDICTS, 0)]:
                entry.with_suffix(".bin").unlink(missing_ok=True)
                entry.unlink(missing_ok=True)
        except OSError:  # another push pruning at once, or a folder that cannot be written
            pass
