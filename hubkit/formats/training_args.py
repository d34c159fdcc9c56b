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
   accelerate that is no class name refuses the file;
2. ``torch.load(weights_only=True)`` then reads it with each of those globals mapped to a `_Recorded`, a
   stand-in class that only keeps what it is built with, behind ``__setstate__`` (a pickle's state never
   reaches the stand-in's own attributes): the real classes are never imported or called. A global the
   listing cannot see (one the pickle builds from strings) is refused by that loader;
3. a class outside transformers, TRL and accelerate may only be the saved object itself, built as an
   object of fields: a config subclassed in the trainer's own module (Unsloth's
   ``unsloth_compiled_cache.UnslothGRPOTrainer.UnslothGRPOConfig``, open-r1's
   ``open_r1.configs.GRPOConfig``); its name is recorded (`TrainingArgs.config_class`). Such a class
   anywhere else (a value, an enum, a call) refuses the file;
4. what the stand-ins kept becomes plain data: an enum its value, a config object its fields, at most
   `MAX_VALUES` values (shared references would otherwise expand without bound).

    args = read_training_args(checkpoint / "training_args.bin")
    args.fields        # {"learning_rate": 5e-06, ...}
    args.config_class  # "trl.trainer.grpo_config.GRPOConfig"

torch is imported only by `read_training_args`, and only for a file that is a zip archive.
"""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

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


# A name the loader may map to a stand-in outside the trainer modules: a class's (CapWords last part).
_CLASS_NAME_RE = re.compile(r"^[A-Za-z_][\w.]*\.[A-Z]\w*$")


@dataclass(frozen=True)
class TrainingArgs:
    """A saved TrainingArguments, read as data.

    Args:
        fields: every field the saved object held, enums as their values.
        config_class: the saved object's class, "module.Name" (None for a saved plain dict).
    """

    fields: dict[str, Any]
    config_class: str | None


class _Recorded:
    """Stands in for the classes a training_args.bin names (one subclass per name, `name`): keeps its
    constructor arguments, whether the pickle called it (an enum, a function) or only created it (an object
    of fields), and the state BUILD gives it, as given; it does nothing else."""

    __slots__ = ("args", "called", "state")
    name: ClassVar[str] = ""

    def __new__(cls, *args: Any, **_kwargs: Any) -> _Recorded:
        recorded = object.__new__(cls)
        recorded.args, recorded.called, recorded.state = args, False, None
        return recorded

    def __init__(self, *_args: Any, **_kwargs: Any) -> None:
        self.called = True  # only REDUCE calls a class; NEWOBJ (an object pickled by its fields) does not

    def __setstate__(self, state: Any) -> None:
        self.state = state  # checked by `_plain`: the loader gives BUILD's state here, whatever it is


def _stand_in(name: str) -> type[_Recorded]:
    return type("_Recorded", (_Recorded,), {"__slots__": (), "name": name})


def _is_trainer_global(name: str) -> bool:
    return name.startswith(TRAINER_MODULES) or name in OTHER_GLOBALS


def _refuse_global(label: str, name: str) -> None:
    raise TrainingArgsError(
        f"{label} names {name}, which is not a transformers, TRL or accelerate class nor the saved "
        "config's own: refusing to read it (delete the file to publish without its hyperparameters)"
    )


class _Budget:
    """Counts the values `_plain` builds, refusing a pickle that would build more than `MAX_VALUES`; and
    `root`, the one object whose class may be outside the trainer modules (see the top)."""

    def __init__(self, label: str, root: object) -> None:
        self.label = label
        self.left = MAX_VALUES
        self.root = root

    def spend(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise TrainingArgsError(
                f"{self.label}: holds more than {MAX_VALUES} values: not training arguments"
            )


def _fields(value: _Recorded, label: str) -> dict[Any, Any] | None:
    """The fields BUILD gave a stand-in (pickle's ``state`` or ``(state, slot state)``), None if none."""
    state = value.state
    parts = state if isinstance(state, tuple) and len(state) == 2 else (state,)
    if not all(part is None or isinstance(part, dict) for part in parts):
        raise TrainingArgsError(
            f"{label}: the state of its {value.name} is not fields: not training arguments"
        )
    fields = {k: v for part in parts if part for k, v in part.items()}
    return fields or None


def _plain(value: Any, budget: _Budget, depth: int = 0) -> Any:
    """What the stand-ins recorded, as JSON-like data (an enum's value, a config's fields)."""
    budget.spend()
    if depth > 8:
        return None
    if isinstance(value, _Recorded):
        fields = _fields(value, budget.label)
        if not _is_trainer_global(value.name) and (value is not budget.root or value.called or not fields):
            _refuse_global(budget.label, value.name)
        if fields:
            return {str(k): _plain(v, budget, depth + 1) for k, v in fields.items()}
        if len(value.args) == 1:
            return _plain(value.args[0], budget, depth + 1)
        return [_plain(a, budget, depth + 1) for a in value.args]
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


def read_training_args(path: Path, label: str | None = None) -> TrainingArgs:
    """A saved `TrainingArguments` (or a subclass of it, whatever its module), as plain data, read without
    running the pickle's code: every field the saved object held (the caller keeps the ones it needs), and
    its class's name.

    Raises:
        TrainingArgsError: not a torch.save archive, too large, a global outside transformers / TRL /
            accelerate other than the saved object's own class, or a pickle torch refuses.
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
        if not _is_trainer_global(name) and not _CLASS_NAME_RE.match(name):
            _refuse_global(label, name)  # a function (os.system): refused before anything is loaded
    try:
        with torch.serialization.safe_globals([(_stand_in(name), name) for name in names]):
            loaded = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    # Any failure of the safe loader on a hostile pickle (STOP on an empty stack, a persistent id that is
    # no storage) is this file's fault, whatever torch raises for it.
    except Exception as e:
        refused = _REFUSED_GLOBAL_RE.search(str(e))
        if refused:
            _refuse_global(label, refused[1])
        raise TrainingArgsError(f"{label}: torch refused to read it ({type(e).__name__})") from e
    fields = _plain(loaded, _Budget(label, loaded))
    if not isinstance(fields, dict):
        raise TrainingArgsError(f"{label}: does not hold training arguments")
    return TrainingArgs(fields, loaded.name if isinstance(loaded, _Recorded) else None)
