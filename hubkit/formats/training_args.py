"""``training_args.bin``: the `TrainingArguments` (TRL's `GRPOConfig`, ...) a transformers `Trainer` saves
beside each checkpoint, with ``torch.save``: a zip archive holding one pickle.

A pickle runs whatever code it names, so the file is never unpickled as it is:

0. the archive must be exactly what ``torch.save`` writes for an object without tensors: the zip header at
   byte 0 (torch reads a legacy pickle stream placed before it), one folder holding ``data.pkl`` and torch's
   few bookkeeping records, names as torch writes them (its lookup ignores case: ``DATA.PKL`` would be
   read instead), every member within `MAX_BYTES` by its declared and by its inflated size. So the pickle
   checked below is the pickle torch loads;
1. torch lists the globals the pickle names outside its own safe set, by disassembling it (nothing
   executed: `torch.serialization.get_unsafe_globals_in_checkpoint`); one outside transformers, TRL and
   accelerate refuses the file;
2. ``torch.load(weights_only=True)`` then reads it with each of those globals mapped to `_Recorded`, one
   stand-in class that only keeps what it is built with: the real classes are never imported or called.
   A global the listing cannot see (one the pickle builds from strings) is refused by that loader;
3. what the stand-ins kept becomes plain data: an enum its value, a config object its fields, at most
   `MAX_VALUES` values (shared references would otherwise expand without bound).

    fields = read_training_args(checkpoint / "training_args.bin")   # {"learning_rate": 5e-06, ...}

torch is imported only by `read_training_args`, and only for a file that is a zip archive.
"""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path
from typing import Any

from hubkit.errors import FileFormatError, TrainingArgsError
from hubkit.formats.json_file import read_bounded

TRAINING_ARGS = "training_args.bin"
# A GRPOConfig pickles to ~10 KB; anything this large is not training arguments.
MAX_BYTES = 4_000_000
# The modules whose classes a saved TrainingArguments names (config classes and their enums).
TRAINER_MODULES = ("transformers.", "trl.", "accelerate.")
# Other globals a saved TrainingArguments names: the device it was set up on.
OTHER_GLOBALS = frozenset({"torch.device"})
# A TrainingArguments pickles to ~300 fields; shared references in a hostile pickle could expand to billions.
MAX_VALUES = 20_000
ZIP_HEADER = b"PK\x03\x04"
# What torch.save writes in its archive's folder for an object that holds no tensor (no data/N storages).
ARCHIVE_RECORDS = frozenset(
    {"data.pkl", "byteorder", "version", ".data/version", ".data/serialization_id", ".format_version",
     ".storage_alignment"}
)  # fmt: skip
# How torch's safe loader names a global it refuses (in its multi-line message).
_REFUSED_GLOBAL_RE = re.compile(r"GLOBAL ([\w.]+)")


class _Recorded:
    """Stands in for every class a training_args.bin names: keeps its constructor arguments and the state
    set on it, and does nothing else."""

    __slots__ = ("__dict__", "_hubkit_args")

    def __new__(cls, *args: Any, **_kwargs: Any) -> _Recorded:
        recorded = object.__new__(cls)
        recorded._hubkit_args = args
        return recorded

    def __init__(self, *_args: Any, **_kwargs: Any) -> None:
        pass


def _refuse_global(label: str, name: str) -> None:
    raise TrainingArgsError(
        f"{label} names {name}, which is not a transformers, TRL or accelerate class: refusing to "
        "read it (delete the file to publish without its hyperparameters)"
    )


class _Budget:
    """Counts the values `_plain` builds, refusing a pickle that would build more than `MAX_VALUES`."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.left = MAX_VALUES

    def spend(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise TrainingArgsError(
                f"{self.label}: holds more than {MAX_VALUES} values: not training arguments"
            )


def _plain(value: Any, budget: _Budget, depth: int = 0) -> Any:
    """What the stand-ins recorded, as JSON-like data (an enum's value, a config's fields)."""
    budget.spend()
    if depth > 8:
        return None
    if isinstance(value, _Recorded):
        if value.__dict__:
            return {str(k): _plain(v, budget, depth + 1) for k, v in value.__dict__.items()}
        args = value._hubkit_args
        if len(args) == 1:
            return _plain(args[0], budget, depth + 1)
        return [_plain(a, budget, depth + 1) for a in args]
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v, budget, depth + 1) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v, budget, depth + 1) for k, v in value.items()}
    return str(value)  # torch.device("cpu") → "cpu"


def _checked_members(archive: zipfile.ZipFile, label: str) -> str:
    """The archive's data.pkl name, once every member is one torch.save writes (see the top); else refused."""
    infos = archive.infolist()
    folders = {info.filename.split("/", 1)[0] for info in infos}
    if len(folders) != 1 or any("/" not in info.filename for info in infos):
        raise TrainingArgsError(f"{label}: not a torch.save archive (one folder holding data.pkl)")
    folder = folders.pop()
    for info in infos:
        record = info.filename[len(folder) + 1 :]
        if record not in ARCHIVE_RECORDS:
            raise TrainingArgsError(
                f"{label}: holds {info.filename!r}, which torch.save does not write for training arguments"
            )
    if min(info.header_offset for info in infos) != 0:
        raise TrainingArgsError(f"{label}: has data before its archive, which torch would read instead")
    if sum(info.file_size for info in infos) > MAX_BYTES:
        raise TrainingArgsError(
            f"{label}: its members declare more than {MAX_BYTES} bytes: not training arguments"
        )
    for info in infos:  # inflated with a cap: a member larger than it declares is a zip bomb
        with archive.open(info) as member:
            if len(member.read(info.file_size + 1)) != info.file_size:
                raise TrainingArgsError(f"{label}: {info.filename} is not the size it declares")
    name = f"{folder}/data.pkl"
    if name not in archive.namelist():
        raise TrainingArgsError(f"{label}: not a torch.save archive (no data.pkl)")
    return name


def _pickle_of(data: bytes, label: str) -> bytes:
    if not data.startswith(ZIP_HEADER):
        raise TrainingArgsError(f"{label}: not a torch.save archive (it does not start with a zip header)")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return archive.read(_checked_members(archive, label))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError, OSError) as e:
        raise TrainingArgsError(f"{label}: not a torch.save archive ({e})") from e


def is_torch_archive(path: Path) -> bool:
    """Whether `path` is a zip archive, as ``torch.save`` writes (checked without torch)."""
    try:
        return zipfile.is_zipfile(path)
    except OSError:
        return False


def read_training_args(path: Path, label: str | None = None) -> dict[str, Any]:
    """The fields of a saved `TrainingArguments`, as plain data, read without running the pickle's code.

    Args:
        path: a ``training_args.bin``.
        label: how messages name it (default: its name).

    Returns:
        Every field the saved object held (the caller keeps the ones it needs), enums as their values.

    Raises:
        TrainingArgsError: not a torch.save archive, too large, a global outside transformers / TRL /
            accelerate (refused before anything is loaded), or a pickle torch refuses.
    """
    label = label or path.name
    try:
        data = read_bounded(path, MAX_BYTES, label)
    except FileFormatError as e:
        raise TrainingArgsError(str(e)) from e
    _pickle_of(data, label)  # the archive's layout and sizes, checked before torch reads it
    import torch  # imported here: 1 s, paid only by a run that saved its training arguments

    try:
        names = torch.serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(data))
    except Exception as e:
        raise TrainingArgsError(f"{label}: not a readable pickle ({type(e).__name__})") from e
    for name in sorted(names):
        if not name.startswith(TRAINER_MODULES) and name not in OTHER_GLOBALS:
            _refuse_global(label, name)
    try:
        with torch.serialization.safe_globals([(_Recorded, name) for name in names]):
            loaded = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    # Any failure of the safe loader on a hostile pickle (a BUILD of the wrong type, STOP on an empty
    # stack, a persistent id that is no storage) is this file's fault, whatever torch raises for it.
    except Exception as e:
        refused = _REFUSED_GLOBAL_RE.search(str(e))
        if refused:
            _refuse_global(label, refused[1])
        raise TrainingArgsError(f"{label}: torch refused to read it ({type(e).__name__})") from e
    fields = _plain(loaded, _Budget(label))
    if not isinstance(fields, dict):
        raise TrainingArgsError(f"{label}: does not hold training arguments")
    return fields
