"""``training_args.bin``: the `TrainingArguments` (TRL's `GRPOConfig`, ...) a transformers `Trainer` saves
beside each checkpoint, with ``torch.save``: a zip archive holding one pickle.

A pickle runs whatever code it names, so the file is never unpickled as it is:

1. the archive's pickle is disassembled (`pickletools`, nothing executed) and every global it names is
   listed; a global outside transformers, TRL and accelerate (and ``torch.device``) refuses the file;
2. ``torch.load(weights_only=True)`` then reads it with each of those globals mapped to `_Recorded`, one
   stand-in class that only keeps what it is built with: the real classes are never imported or called;
3. what the stand-ins kept becomes plain data: an enum its value, a config object its fields.

    fields = read_training_args(checkpoint / "training_args.bin")   # {"learning_rate": 5e-06, ...}

torch is imported only by `read_training_args`, and only for a file that is a zip archive.
"""

from __future__ import annotations

import io
import pickle
import pickletools
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
_STRING_OPS = frozenset({"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "STRING", "BINSTRING"})
_MEMO_PUT_OPS = frozenset({"BINPUT", "LONG_BINPUT", "PUT"})
_MEMO_GET_OPS = frozenset({"BINGET", "LONG_BINGET", "GET"})


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


def pickled_globals(data: bytes, label: str) -> tuple[str, ...]:
    """Every global (``module.name``) a pickle names, read by disassembling it (nothing is executed).

    ``STACK_GLOBAL`` takes its module and name from the two strings pushed before it (directly or through
    the memo); one whose operands are not such strings cannot be read statically and is refused.

    Raises:
        TrainingArgsError: not a pickle, or a global whose name is not written in the pickle.
    """
    found: list[str] = []
    strings: list[str | None] = []  # what each op pushed, when it was a string (None otherwise)
    memo: dict[int, str | None] = {}
    try:
        for op, arg, _ in pickletools.genops(data):
            name = op.name
            if name in ("GLOBAL", "INST"):
                found.append(str(arg).replace(" ", "."))
                strings.append(None)
            elif name == "STACK_GLOBAL":
                if len(strings) < 2 or strings[-1] is None or strings[-2] is None:
                    raise TrainingArgsError(f"{label}: names a class it computes: refusing to read it")
                found.append(f"{strings[-2]}.{strings[-1]}")
                strings.append(None)
            elif name in _STRING_OPS:
                strings.append(arg if isinstance(arg, str) else None)
            elif name in _MEMO_PUT_OPS:
                memo[int(arg)] = strings[-1] if strings else None
            elif name == "MEMOIZE":
                memo[len(memo)] = strings[-1] if strings else None
            elif name in _MEMO_GET_OPS:
                strings.append(memo.get(int(arg)))
            else:
                strings.append(None)
    except (ValueError, EOFError) as e:
        raise TrainingArgsError(f"{label}: not a readable pickle ({e})") from e
    return tuple(dict.fromkeys(found))


def _allowed(name: str) -> bool:
    return name.startswith(TRAINER_MODULES) or name in OTHER_GLOBALS


def _plain(value: Any, depth: int = 0) -> Any:
    """What the stand-ins recorded, as JSON-like data (an enum's value, a config's fields)."""
    if depth > 8:
        return None
    if isinstance(value, _Recorded):
        if value.__dict__:
            return {str(k): _plain(v, depth + 1) for k, v in value.__dict__.items()}
        args = value._hubkit_args
        return _plain(args[0], depth + 1) if len(args) == 1 else [_plain(a, depth + 1) for a in args]
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    return str(value)  # torch.device("cpu") → "cpu"


def _pickle_of(data: bytes, label: str) -> bytes:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = [n for n in archive.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
            if len(names) != 1:
                raise TrainingArgsError(f"{label}: not a torch.save archive (no single data.pkl)")
            info = archive.getinfo(names[0])
            if info.file_size > MAX_BYTES:
                raise TrainingArgsError(
                    f"{label}: its pickle is {info.file_size} bytes, too large to be arguments"
                )
            return archive.read(info)
    except zipfile.BadZipFile as e:
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
    names = pickled_globals(_pickle_of(data, label), label)
    refused = [name for name in names if not _allowed(name)]
    if refused:
        raise TrainingArgsError(
            f"{label} names {refused[0]}, which is not a transformers, TRL or accelerate class: refusing to "
            "read it (delete the file to publish without its hyperparameters)"
        )
    import torch  # imported here: 1 s, paid only by a run that saved its training arguments

    try:
        with torch.serialization.safe_globals([(_Recorded, name) for name in names]):
            loaded = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    except (pickle.UnpicklingError, RuntimeError, ValueError, TypeError, EOFError) as e:
        raise TrainingArgsError(f"{label}: torch refused to read it ({type(e).__name__})") from e
    fields = _plain(loaded)
    if not isinstance(fields, dict):
        raise TrainingArgsError(f"{label}: does not hold training arguments")
    return fields
