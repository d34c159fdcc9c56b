"""The entry points: vet one file, or a checkpoint folder, before anything is published or created.

    context = VetContext.for_run(run.run_dir, run.manifest.base_model, token)
    files, left_out = vet_checkpoint(checkpoint.path, context)     # every refusal raised here
    vetted = vet_file(adapter_dir / "adapter_config.json", kinds.ADAPTER_CONFIG, context)

Each file is read once, bounded by its kind's size (checked before reading), and what is published is
what the vetting wrote: `VettedFile.data`. Safetensors files are the exception: only their header is
read here (`VettedFile.weights`), and the tensor data are read, checked and hashed once, by the adapter
read that publishes them. A GGUF file (written by `hubkit.export` from vetted files) is vetted by its
header's strings and published as it is on disk (`VettedFile.on_disk`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from hubkit.errors import (
    FileFormatError,
    FileTooLargeError,
    MalformedFileError,
    OversizedFileError,
    SecretInFileError,
)
from hubkit.formats.json_file import read_bounded, too_large
from hubkit.safety import kinds
from hubkit.safety.kinds import Kind, LeftOut, classify_folder
from hubkit.safety.links import follow_to_regular
from hubkit.safety.local_paths import LocalPathFinder
from hubkit.safety.scan import Scanner
from hubkit.safety.secrets import SecretFinder
from hubkit.safety.validators import VALIDATORS, Vetting
from hubkit.safety.verdicts import KnownVerdicts
from hubkit.safety.weights import vet_header

_WEIGHT_KINDS = (kinds.ADAPTER_WEIGHTS, kinds.MODEL_WEIGHTS)
# The variables naming a Hugging Face cache besides HF_HOME (no path under them is published).
_CACHES = ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_DATASETS_CACHE", "TRANSFORMERS_CACHE", "HF_XET_CACHE")


@dataclass(frozen=True)
class VetContext:
    """What vetting needs to know about the push.

    Attributes:
        hub_base_id: the base model's Hub id: what fields naming the model by its path become.
        run_dir: the run directory (its path must not be published; messages name files relative to it).
        cache_dirs: the Hugging Face caches (their paths must not be published either).
        home_dir: the user's home, or None.
        token: the Hugging Face token in use (looked for when at least 16 characters long).
    """

    hub_base_id: str
    run_dir: Path
    cache_dirs: tuple[Path, ...] = ()
    home_dir: Path | None = None
    token: str | None = field(default=None, repr=False)

    @classmethod
    def for_run(
        cls, run_dir: Path, hub_base_id: str, token: str | None, environ: Mapping[str, str] | None = None
    ) -> VetContext:
        """A context with this machine's caches and home, read from `environ` (default: this process's)."""
        environ = os.environ if environ is None else environ
        home = Path(environ.get("HOME") or Path.home())
        xdg = Path(environ.get("XDG_CACHE_HOME") or home / ".cache")
        caches = [Path(environ.get("HF_HOME") or xdg / "huggingface")]
        caches += [Path(environ[name]) for name in _CACHES if environ.get(name)]
        return cls(
            hub_base_id=hub_base_id,
            run_dir=Path(run_dir),
            cache_dirs=tuple(dict.fromkeys(c for c in caches if c.is_absolute())),
            home_dir=home if str(home) not in ("", "/") else None,
            token=token,
        )

    def scanner(self) -> Scanner:
        """The scanner for this push: its token, and the folders of this machine it knows."""
        dirs = [(self.run_dir.absolute(), "the run directory")]
        dirs += [(c, "a cache folder") for c in self.cache_dirs]
        if self.home_dir is not None:
            dirs.append((self.home_dir, "the home directory"))
        return Scanner(SecretFinder(self.token), LocalPathFinder.for_dirs(dirs))

    def key(self) -> str:
        """A digest of everything in the context a verdict depends on (the token only hashed)."""
        token = hashlib.sha256(self.token.encode()).hexdigest() if self.token else ""
        home = str(self.home_dir) if self.home_dir is not None else ""
        parts = [self.hub_base_id, str(self.run_dir.absolute()), home, token, *map(str, self.cache_dirs)]
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()

    def label(self, path: Path) -> str:
        """How messages name a file: relative to the run directory, else by its name (never its full path)."""
        for run_dir in (self.run_dir, self.run_dir.resolve()):
            for candidate in (path, path.absolute()):
                try:
                    return candidate.relative_to(run_dir).as_posix()
                except ValueError:
                    continue
        return path.name


@dataclass(frozen=True)
class WeightsSource:
    """A safetensors file to publish: `header` then the tensor data of `path` from `data_start` on.

    Attributes:
        path: the saved file (symlinks resolved).
        header: the 8-byte length and JSON header to publish, written from what was read.
        data_start: where the tensor data begin in `path`.
        saved_header_kept: `path` already starts with `header`: the saved file may be published as it is.
    """

    path: Path
    header: bytes = field(repr=False)
    data_start: int
    saved_header_kept: bool


@dataclass(frozen=True)
class VettedFile:
    """A file as it may be published.

    Exactly one of `data` (the bytes to publish, written from what was read), `weights` (a
    safetensors file, its header vetted) and `on_disk` (a GGUF file, its header vetted) is set.

    Attributes:
        path_in_repo: where it goes.
        kind: its kind.
        size: the published size in bytes.
        sha256: of `data`; None for weights (hashed in the read that checks their tensors).
        notes: what vetting changed (fields rewritten, keys dropped), for the dry run.
    """

    path_in_repo: str
    kind: Kind
    size: int
    data: bytes | None = field(default=None, repr=False)
    weights: WeightsSource | None = None
    on_disk: Path | None = None
    sha256: str | None = None
    notes: tuple[str, ...] = ()

    def placed(self, path_in_repo: str) -> VettedFile:
        """The same file at another place in the repo (``checkpoints/global_step_N/...``)."""
        return replace(self, path_in_repo=path_in_repo)


def _refusal(
    error: FileFormatError, kind: Kind, label: str, data: bytes | None, scanner: Scanner
) -> Exception:
    """The refusal of a file that is not of its kind: naming a secret it holds, if it holds one.

    A reader's message may quote the file (serde's "unknown variant `...`", Jinja's "got '...'"): when
    the quote holds a secret or a local path, only the file is named.
    """
    if isinstance(error, FileTooLargeError):
        return OversizedFileError(f"refusing to publish {error} for {kind.called}")
    reason = str(error)
    if scanner.secrets.find(reason) is not None or scanner.paths.find(reason) is not None:
        reason = f"{label}: it does not parse"
    secret = scanner.secret_in(data.decode("utf-8", errors="replace")) if data is not None else None
    if secret is not None:
        return SecretInFileError(
            f"refusing to publish {reason}: it is not {kind.called}, and it holds {secret}"
        )
    return MalformedFileError(f"refusing to publish {reason}: it is not {kind.called}")


def _vet_data(
    path_in_repo: str, kind: Kind, data: bytes, label: str, context: VetContext, known: KnownVerdicts | None
) -> VettedFile:
    read_sha256 = hashlib.sha256(data).hexdigest()
    remembered = known.get(kind, read_sha256) if known is not None else None
    if remembered is not None:
        written = data if remembered.written is None else remembered.written
        sha256, notes = remembered.sha256, remembered.notes
    else:
        scanner = context.scanner()
        try:
            validated = VALIDATORS[kind](
                data, Vetting(label=label, hub_id=context.hub_base_id, scanner=scanner)
            )
        except FileFormatError as e:
            raise _refusal(e, kind, label, data, scanner) from e
        written, notes = validated.data, validated.notes
        same = written == data
        sha256 = read_sha256 if same else hashlib.sha256(written).hexdigest()
        if known is not None:
            known.put(kind, read_sha256, None if same else written, notes)
    return VettedFile(
        path_in_repo=path_in_repo, kind=kind, size=len(written), data=written, sha256=sha256, notes=notes
    )


def _vet_weights(path_in_repo: str, kind: Kind, path: Path, label: str, context: VetContext) -> VettedFile:
    scanner = context.scanner()
    try:
        vetted = vet_header(path, kind.max_bytes, label)
    except FileFormatError as e:
        raise _refusal(e, kind, label, None, scanner) from e
    scanner.check_strings(vetted.tensor_names, label, "a tensor name")
    scanner.check_strings(vetted.metadata_strings, label, "its metadata")
    notes = (f"dropped safetensors metadata: {', '.join(vetted.dropped)}",) if vetted.dropped else ()
    return VettedFile(
        path_in_repo=path_in_repo,
        kind=kind,
        size=vetted.published_size,
        weights=WeightsSource(
            path=path,
            header=vetted.prefix,
            data_start=vetted.header.data_start,
            saved_header_kept=vetted.saved_prefix_kept,
        ),
        notes=notes,
    )


def _vet_gguf(path_in_repo: str, path: Path, label: str, context: VetContext) -> VettedFile:
    # Imported here: the GGUF modules bring torch, numpy and gguf-py (1.9 s), which only --gguf needs.
    from hubkit.formats.gguf import header_strings

    scanner = context.scanner()
    size = path.stat().st_size
    if size > kinds.GGUF_WEIGHTS.max_bytes:
        raise _refusal(
            too_large(label, size, kinds.GGUF_WEIGHTS.max_bytes), kinds.GGUF_WEIGHTS, label, None, scanner
        )
    try:
        strings = header_strings(path, label)
    except FileFormatError as e:
        raise _refusal(e, kinds.GGUF_WEIGHTS, label, None, scanner) from e
    scanner.check_strings(strings, label, "its metadata")
    return VettedFile(path_in_repo=path_in_repo, kind=kinds.GGUF_WEIGHTS, size=size, on_disk=path)


def vet_file(
    path: Path,
    kind: Kind,
    context: VetContext,
    *,
    path_in_repo: str | None = None,
    label: str | None = None,
    known: KnownVerdicts | None = None,
) -> VettedFile:
    """Read a file as its kind (`hubkit.safety.kinds`), check it, and return what to publish.

    Args:
        path: the file (a symlink is followed only to a regular file).
        path_in_repo: where it goes (default: its name).
        label: how messages name it (default: its path relative to the run directory, else its name).
        known: verdicts remembered by content: bytes that passed before in this context are read (within
            their bound) but not vetted again, and a pass is remembered.

    Raises:
        UnsafeLinkError: a symlink to anything but a regular file.
        OversizedFileError: larger than its kind allows (refused unread).
        MalformedFileError: not of its kind's format.
        SecretInFileError: it holds a secret (named, never repeated), or it is not of its kind and holds one.
        LocalPathInFileError: it holds an absolute path of this machine (the field or line named).
    """
    label = label or context.label(path)
    path_in_repo = path_in_repo or path.name
    source = follow_to_regular(path, label)
    if kind in _WEIGHT_KINDS:
        return _vet_weights(path_in_repo, kind, source, label, context)
    if kind == kinds.GGUF_WEIGHTS:
        return _vet_gguf(path_in_repo, source, label, context)
    try:
        data = read_bounded(source, kind.max_bytes, label)
    except FileFormatError as e:
        raise _refusal(e, kind, label, None, context.scanner()) from e
    return _vet_data(path_in_repo, kind, data, label, context, known)


def vet_bytes(
    path_in_repo: str,
    kind: Kind,
    data: bytes,
    context: VetContext,
    *,
    label: str | None = None,
    known: KnownVerdicts | None = None,
) -> VettedFile:
    """`vet_file` for content a push generates (the card, the manifest, the metrics).

    Raises:
        OversizedFileError, MalformedFileError, SecretInFileError, LocalPathInFileError: as `vet_file`.
    """
    label = label or path_in_repo
    if kind in (*_WEIGHT_KINDS, kinds.GGUF_WEIGHTS):
        raise ValueError("weights files are vetted from disk (vet_file)")
    if len(data) > kind.max_bytes:
        raise _refusal(too_large(label, len(data), kind.max_bytes), kind, label, None, context.scanner())
    return _vet_data(path_in_repo, kind, data, label, context, known)


def vet_checkpoint(folder: Path, context: VetContext) -> tuple[tuple[VettedFile, ...], tuple[LeftOut, ...]]:
    """Vet every publishable file of a checkpoint folder (TRL's ``checkpoint-N/``, verl's
    ``actor/lora_adapter/`` or ``actor/huggingface/``); say why each other file is left out.

    Returns:
        The vetted files (path in repo: their name) and the files left out, each sorted by name. A left-out
        file whose name itself holds a secret is listed without its name.

    Raises:
        UnsafeLinkError, OversizedFileError, MalformedFileError, SecretInFileError, LocalPathInFileError:
            as `vet_file`, for the first file refused.
    """
    classified = classify_folder(folder)
    files = tuple(vet_file(path, kind, context) for _, path, kind in classified.published)
    secrets = context.scanner().secrets
    left_out = tuple(
        item
        if secrets.find(item.name) is None
        else LeftOut("(a file whose name holds a secret)", item.reason)
        for item in classified.left_out
    )
    return files, left_out
