"""A hostile ``training_args.bin``: what hubkit checks must be what torch loads, bounded in size and in the
values it builds, and every malformed pickle one line of error (nothing executed, no traceback)."""

from __future__ import annotations

import io
import os
import pickle
import shutil
import sys
import types
import zipfile
from pathlib import Path

import pytest
import torch

from hubkit.errors import TrainingArgsError
from hubkit.formats.training_args import MAX_BYTES, read_training_args

FAKE_MODULE = "trl.hubkit_test_fake"  # under trl.: a module name the allow-list accepts


@pytest.fixture
def trl_class():
    """A class that pickles as ``trl.hubkit_test_fake.Config`` (registered only while the test runs)."""
    module = types.ModuleType(FAKE_MODULE)

    class Config:
        pass

    Config.__module__, Config.__qualname__ = FAKE_MODULE, "Config"
    module.Config = Config
    sys.modules[FAKE_MODULE] = module
    yield Config
    del sys.modules[FAKE_MODULE]


def _saved(value: object) -> bytes:
    buffer = io.BytesIO()
    torch.save(value, buffer)
    return buffer.getvalue()


def _rewritten(
    archive: bytes, replaced: dict[str, bytes], added: dict[str, bytes] | None = None, deflate: bool = False
) -> bytes:
    """torch.save's `archive` with the members ending in a `replaced` key given its bytes, and `added` ones."""
    out = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(archive)) as source,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED) as target,
    ):
        for info in source.infolist():
            ending = next((e for e in replaced if info.filename.endswith(e)), None)
            target.writestr(info.filename, replaced[ending] if ending else source.read(info))
        for name, data in (added or {}).items():
            target.writestr(name, data)
    return out.getvalue()


def _refused(tmp_path: Path, data: bytes, *expected: str) -> str:
    path = tmp_path / "training_args.bin"
    path.write_bytes(data)
    with pytest.raises(TrainingArgsError) as error:
        read_training_args(path)
    message = str(error.value)
    assert "\n" not in message and all(part in message for part in expected), message
    return message


def _config(trl_class, **fields: object) -> object:
    config = trl_class()
    config.__dict__.update(fields)
    return config


def test_a_legacy_stream_before_a_harmless_archive_is_refused(tmp_path: Path, trl_class) -> None:
    # torch.load reads the stream at byte 0 (a pre-zip torch.save); zipfile finds the archive after it.
    legacy = io.BytesIO()
    torch.save({"learning_rate": 9.9}, legacy, _use_new_zipfile_serialization=False)
    harmless = _saved(_config(trl_class, learning_rate=5e-6))
    _refused(tmp_path, legacy.getvalue() + harmless, "does not start with a zip header")


def test_a_second_pickle_named_in_another_case_is_refused(tmp_path: Path, trl_class) -> None:
    # torch's archive reader finds records ignoring case: DATA.PKL could be the one it loads.
    harmless = _saved(_config(trl_class, learning_rate=5e-6))
    second = {"archive/DATA.PKL": pickle.dumps({"learning_rate": 9.9}, protocol=2)}
    _refused(tmp_path, _rewritten(harmless, {}, second), "'archive/DATA.PKL'", "torch.save does not write")


def test_a_zip_bomb_is_refused_on_its_declared_size(tmp_path: Path, trl_class) -> None:
    harmless = _saved(_config(trl_class, learning_rate=5e-6))
    # 8 MB of zeros deflate to a few KB.
    bomb = _rewritten(harmless, {"/version": b"3" + b"\0" * (2 * MAX_BYTES)}, deflate=True)
    assert len(bomb) < 100_000
    _refused(tmp_path, bomb, f"more than {MAX_BYTES} bytes")


def _declare_size(archive: bytes, member: str, size: int) -> bytes:
    """`archive` with `member`'s uncompressed size given as `size` in its local and central headers."""
    data = bytearray(archive)
    with zipfile.ZipFile(io.BytesIO(archive)) as source:
        local = source.getinfo(member).header_offset
    data[local + 22 : local + 26] = size.to_bytes(4, "little")
    start = 0
    while (central := data.find(b"PK\x01\x02", start)) >= 0:
        name_length = int.from_bytes(data[central + 28 : central + 30], "little")
        if data[central + 46 : central + 46 + name_length] == member.encode():
            data[central + 24 : central + 28] = size.to_bytes(4, "little")
        start = central + 4
    return bytes(data)


def test_a_member_larger_than_it_declares_is_refused(tmp_path: Path, trl_class) -> None:
    harmless = _saved(_config(trl_class, learning_rate=5e-6))
    inflating = _rewritten(harmless, {"/byteorder": b"\0" * 1_000_000}, deflate=True)
    _refused(tmp_path, _declare_size(inflating, "archive/byteorder", 6), "archive/byteorder")


def test_shared_references_cannot_expand_without_bound(tmp_path: Path, trl_class) -> None:
    # An 8 KB pickle: six levels of 100 references to the level below, 10^12 values once expanded.
    nested: object = [0] * 100
    for _ in range(5):
        nested = [nested] * 100
    data = _saved(_config(trl_class, learning_rate=5e-6, notes=nested))
    assert len(data) < 20_000
    _refused(tmp_path, data, "holds more than")


@pytest.mark.parametrize(
    ("name", "data_pkl"),
    [
        # BUILD with a state that is no dict (trl.hubkit_test_fake.Config, then 5, BUILD).
        ("build state of the wrong type", b"\x80\x02ctrl.hubkit_test_fake\nConfig\n)\x81K\x05b."),
        ("STOP on an empty stack", b"\x80\x02."),
        ("a persistent id that is no storage", b"\x80\x02X\x03\x00\x00\x00abcQ."),
        ("a truncated pickle", b"\x80\x02}q\x00(X\x0d\x00\x00\x00learning_rate"),
    ],
)
def test_a_malformed_pickle_is_one_line_of_error(
    tmp_path: Path, trl_class, name: str, data_pkl: bytes
) -> None:
    archive = _rewritten(_saved(_config(trl_class, learning_rate=5e-6)), {"/data.pkl": data_pkl})
    _refused(tmp_path, archive, "training_args.bin")


def test_the_archive_torch_writes_is_read(tmp_path: Path, trl_class) -> None:
    path = tmp_path / "training_args.bin"
    path.write_bytes(_saved(_config(trl_class, learning_rate=5e-6, optim="adamw_torch")))
    read = read_training_args(path)
    assert read.fields == {"learning_rate": 5e-6, "optim": "adamw_torch"}
    assert read.config_class == f"{FAKE_MODULE}.Config"
    # Saved to a path, torch names the folder after the file: also torch's own layout.
    torch.save(_config(trl_class, learning_rate=1e-5), tmp_path / "other.bin")
    assert read_training_args(tmp_path / "other.bin").fields == {"learning_rate": 1e-5}
    assert not os.environ.get("HUBKIT_DEBUG")


def _pickled_str(text: str) -> bytes:
    return b"X" + len(text).to_bytes(4, "little") + text.encode()


@pytest.mark.parametrize("slots", [("_hubkit_args",), ("args", "state", "called")])
def test_a_build_slot_state_never_reaches_the_readers_own_attributes(
    tmp_path: Path, trl_class, slots: tuple[str, ...]
) -> None:
    # BUILD with (state, slot state): pickle's load_build would setattr each slot, the stand-in's own
    # attributes included (the reader once kept a class's arguments in one: an int there was a TypeError).
    slot_state = b"}" + b"".join(_pickled_str(k) + b"K\x05s" for k in slots)
    data_pkl = b"\x80\x02ctrl.hubkit_test_fake\nConfig\n)\x81N" + slot_state + b"\x86b."
    path = tmp_path / "training_args.bin"
    path.write_bytes(_rewritten(_saved(_config(trl_class, learning_rate=5e-6)), {"/data.pkl": data_pkl}))
    read = read_training_args(path)  # read as data: a slot state is fields like any other
    assert read.fields == dict.fromkeys(slots, 5)
    assert read.config_class == f"{FAKE_MODULE}.Config"


@pytest.fixture
def subclassed(trl_class):
    """Config subclasses in the modules Unsloth and open-r1 define theirs in (registered while the test runs)."""
    made = {}
    for module_name, class_name in (
        ("unsloth_compiled_cache.UnslothGRPOTrainer", "UnslothGRPOConfig"),
        ("open_r1.configs", "GRPOConfig"),
    ):
        package, module = (types.ModuleType(n) for n in (module_name.split(".")[0], module_name))
        subclass = type(class_name, (trl_class,), {"__module__": module_name, "__qualname__": class_name})
        setattr(module, class_name, subclass)
        sys.modules.update({package.__name__: package, module_name: module})
        made[f"{module_name}.{class_name}"] = subclass
    yield made
    for name in made:
        module_name = name.rsplit(".", 1)[0]
        del sys.modules[module_name], sys.modules[module_name.split(".")[0]]


def test_a_config_subclassed_in_its_trainers_own_module_is_read_and_named(
    tmp_path: Path, trl_class, subclassed
) -> None:
    for name, subclass in subclassed.items():
        config = subclass()
        config.__dict__.update(learning_rate=5e-6, lr_scheduler_type=trl_class())
        path = tmp_path / "training_args.bin"
        torch.save(config, path)
        read = read_training_args(path)
        assert read.config_class == name and read.fields["learning_rate"] == 5e-6, read


def test_a_class_outside_the_trainers_is_refused_anywhere_but_the_saved_object(
    tmp_path: Path, trl_class, subclassed
) -> None:
    unsloth = subclassed["unsloth_compiled_cache.UnslothGRPOTrainer.UnslothGRPOConfig"]
    name = "unsloth_compiled_cache.UnslothGRPOTrainer.UnslothGRPOConfig"
    # As a value inside a trainer's config, as an object of no fields, and called (REDUCE) as the root.
    inside = _config(trl_class, learning_rate=5e-6, extra=_config(unsloth, x=1))
    _refused(tmp_path, _saved(inside), f"names {name}, which is not a transformers")
    _refused(tmp_path, _saved(unsloth()), f"names {name}")
    called = b"\x80\x02cunsloth_compiled_cache.UnslothGRPOTrainer\nUnslothGRPOConfig\n}\x85R."
    _refused(tmp_path, _rewritten(_saved(unsloth()), {"/data.pkl": called}), f"names {name}")
    # A name that is no class (a function) is refused before anything is loaded.
    function = b"\x80\x02cos\nsystem\nX\x04\x00\x00\x00trueK\x01\x86R."
    _refused(tmp_path, _rewritten(_saved(unsloth()), {"/data.pkl": function}), "names os.system")


def test_a_run_whose_config_is_subclassed_publishes_its_hyperparameters(
    trl_run_dir: Path, tiny_qwen3, local_hub, hub_api, new_repo_id: str, tmp_path: Path
) -> None:
    from helpers import push_adapters

    # Someone's own script's output folder, as Unsloth (before 2026-08) and open-r1 save it: TRL's
    # GRPOConfig subclassed in their own module (registered here only while it is saved).
    run_dir = tmp_path / "run"
    shutil.copytree(trl_run_dir / "checkpoints", run_dir)
    checkpoints = sorted(run_dir.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    saved = torch.load(checkpoints[-1] / "training_args.bin", weights_only=False)  # the test's own file
    module_name, class_name = "unsloth_compiled_cache.UnslothGRPOTrainer", "UnslothGRPOConfig"
    package, module = types.ModuleType("unsloth_compiled_cache"), types.ModuleType(module_name)
    subclass = type(class_name, (type(saved),), {"__module__": module_name, "__qualname__": class_name})
    setattr(module, class_name, subclass)
    sys.modules.update({"unsloth_compiled_cache": package, module_name: module})
    try:
        saved.__class__ = subclass
        for checkpoint in checkpoints:
            torch.save(saved, checkpoint / "training_args.bin")
    finally:
        del sys.modules[module_name], sys.modules["unsloth_compiled_cache"]
    read = read_training_args(checkpoints[-1] / "training_args.bin")
    assert read.config_class == f"{module_name}.{class_name}"
    extra = ("--base-model", tiny_qwen3.repo_id)
    assert push_adapters(run_dir, new_repo_id, local_hub.endpoint, *extra) == 0
    card = Path(hub_api.hf_hub_download(new_repo_id, "README.md")).read_text()
    row = f"| `learning_rate` | {saved.learning_rate} | `training_args.bin` |"
    assert row in card and "| `num_generations` |" in card, card
