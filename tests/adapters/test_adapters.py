"""Adapter normalization and validation: refusals on hand-made adapters, shape checks against the base on the
local Hub, and logits of every prepared adapter of the real TRL and verl runs."""

from __future__ import annotations

import json
import pickle
import shutil
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from fixtures_runs import VERL_LORA_ALPHA, VERL_LORA_R, copy_verl_run, verl_reference_dir
from helpers import logits, sha256_of
from safetensors.torch import load_file, save_file

from hubkit.adapters.base_check import BaseConfig, check_against_base
from hubkit.adapters.prepare import prepare_adapter, prepare_adapters
from hubkit.adapters.weights_read import scan_weights
from hubkit.errors import AdapterError, BaseModelMismatchError, CheckpointError, RepoNotFoundError
from hubkit.formats.fsdp import load_lora_tensors
from hubkit.formats.peft import normalize_key
from hubkit.formats.safetensors import read_header
from hubkit.hub.hashing import hash_file
from hubkit.runs import Checkpoint, load_run
from hubkit.runs.manifest import LoraSettings, Manifest
from tests.support.runs import TINY_SHAPES, make_run, write_checkpoint

BASE_ID = "hubkit-test/tiny-qwen3"
# Shapes of the tiny Qwen3 (hidden 64, 4 q heads and 2 kv heads of 16): q_proj 64->64, k_proj 64->32.
MODULES = {"model.layers.0.self_attn.q_proj": (64, 64), "model.layers.0.self_attn.k_proj": (64, 32)}
RANK = 4


def _base(base_model: str) -> BaseConfig:
    """The base's config.json from the local Hub, as a push downloads it."""
    return BaseConfig.download(base_model, None, endpoint=None, token=None)


def _tensors(key_suffix: str = ".weight") -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    tensors = {}
    for module, (in_features, out_features) in MODULES.items():
        prefix = f"base_model.model.{module}"
        tensors[f"{prefix}.lora_A{key_suffix}"] = torch.randn(RANK, in_features, generator=generator)
        tensors[f"{prefix}.lora_B{key_suffix}"] = torch.randn(out_features, RANK, generator=generator) * 0.01
    return tensors


def _config(**changes: object) -> dict[str, object]:
    config = {
        "peft_type": "LORA",
        "task_type": None,
        "base_model_name_or_path": "/home/someone/models/tiny",
        "r": RANK,
        "lora_alpha": 8,
        "target_modules": ["k_proj", "q_proj"],
        "inference_mode": False,
    }
    config.update(changes)
    return config


def _trl_run(
    run_dir: Path,
    tensors: dict[str, torch.Tensor] | None = None,
    config: dict[str, object] | None = None,
    lora: LoraSettings | None = None,
) -> Path:
    """A TRL run directory with one complete checkpoint holding the given adapter."""
    run_dir.mkdir(parents=True)
    Manifest(
        run_id="handmade", framework="trl", base_model=BASE_ID, base_model_revision="main", lora=lora
    ).save(run_dir)
    return write_checkpoint(
        run_dir,
        1,
        base_model=BASE_ID,
        tensors=_tensors() if tensors is None else tensors,
        config=_config() if config is None else config,
        state={"global_step": 1, "log_history": []},
        training_state=False,
    )


def _prepare(run_dir: Path, out: Path, alongside_others: bool = False):
    run = load_run(run_dir)
    return prepare_adapter(run, run.checkpoints[0], out, alongside_others=alongside_others)


# --- normalization --------------------------------------------------------------------------------


def test_normalize_key_strips_adapter_name_and_fsdp_wrapper() -> None:
    assert (
        normalize_key("base_model.model.model.layers.0.mlp.up_proj.lora_B.default.weight")
        == "base_model.model.model.layers.0.mlp.up_proj.lora_B.weight"
    )
    assert (
        normalize_key("_fsdp_wrapped_module.base_model.model.model.layers.1.self_attn.v_proj.lora_A.weight")
        == "base_model.model.model.layers.1.self_attn.v_proj.lora_A.weight"
    )
    assert normalize_key("model.layers.0.mlp.up_proj.lora_A.weight").startswith("base_model.model.model.")


def test_prepare_writes_exactly_a_normalized_peft_adapter(tmp_path: Path) -> None:
    _trl_run(tmp_path / "run", tensors=_tensors(".default.weight"))
    prepared = _prepare(tmp_path / "run", tmp_path / "out")
    assert sorted(p.name for p in prepared.dir.iterdir()) == [
        "adapter_config.json",
        "adapter_model.safetensors",
    ]
    assert prepared.step == 1 and prepared.num_modules == 2 and not prepared.rebuilt
    written = json.loads((prepared.dir / "adapter_config.json").read_text())
    assert written == prepared.config
    assert written["base_model_name_or_path"] == BASE_ID  # the local training path is gone
    assert written["revision"] == "main"
    assert written["task_type"] == "CAUSAL_LM" and written["inference_mode"] is True
    assert written["lora_alpha"] == 8 and written["r"] == RANK
    tensors = load_file(prepared.dir / "adapter_model.safetensors")
    expected = _tensors()
    assert sorted(tensors) == sorted(expected)
    assert all(torch.equal(tensors[k], expected[k]) for k in expected)
    assert "/home/someone" not in (prepared.dir / "adapter_config.json").read_text()


def test_prepare_accepts_regex_and_all_linear_targets(tmp_path: Path) -> None:
    for name, targets in [("regex", r".*\.(q_proj|k_proj)"), ("all-linear", "all-linear")]:
        _trl_run(tmp_path / name, config=_config(target_modules=targets))
        assert _prepare(tmp_path / name, tmp_path / f"{name}-out").config["target_modules"] == targets


# --- refusals -------------------------------------------------------------------------------------


def _with_nan(tensors: dict[str, torch.Tensor]) -> None:
    next(iter(tensors.values()))[0, 0] = float("nan")


def _with_inf(tensors: dict[str, torch.Tensor]) -> None:
    list(tensors.values())[1][0, 0] = float("inf")


def _zero_b(tensors: dict[str, torch.Tensor]) -> None:
    for key, tensor in tensors.items():
        if ".lora_B." in key:
            tensor.zero_()


def _unpaired(tensors: dict[str, torch.Tensor]) -> None:
    del tensors["base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"]


def _foreign(tensors: dict[str, torch.Tensor]) -> None:
    # A whole weight of a module modules_to_save does not name (lm_head's would be save_embedding_layers').
    tensors["base_model.model.model.norm.weight"] = torch.ones(2)


def _empty(tensors: dict[str, torch.Tensor]) -> None:
    tensors.clear()  # what verl 0.6.1 saves with PEFT >= 0.21


REFUSED_TENSORS: list[tuple[Callable[[dict[str, torch.Tensor]], None], type[Exception], str]] = [
    (_with_nan, AdapterError, "NaN or Inf"),
    (_with_inf, AdapterError, "NaN or Inf"),
    (_zero_b, AdapterError, "every lora_B is zero"),
    (_unpaired, AdapterError, "but not its pair"),
    (
        _foreign,
        AdapterError,
        "unexpected tensor 'base_model.model.model.norm.weight': .*modules_to_save does not",
    ),
    (_empty, AdapterError, "holds no tensors"),
]


@pytest.mark.parametrize("alongside_others", [False, True], ids=["alone", "alongside-others"])
@pytest.mark.parametrize(
    ("mutate", "error", "message"), REFUSED_TENSORS, ids=lambda v: getattr(v, "__name__", "")
)
def test_refuses_bad_tensors(
    tmp_path: Path, mutate, error: type[Exception], message: str, alongside_others: bool
) -> None:
    tensors = _tensors()
    mutate(tensors)
    _trl_run(tmp_path / "run", tensors=tensors)
    with pytest.raises(error, match=f"checkpoint-1 of run handmade: .*{message}") as caught:
        _prepare(tmp_path / "run", tmp_path / "out", alongside_others)
    assert type(caught.value) is error
    assert not (tmp_path / "out").exists()  # nothing half-written


@pytest.mark.parametrize(
    ("config", "lora", "message"),
    [
        (_config(lora_alpha=0), None, "lora_alpha is 0: the adapter would load as a no-op"),
        (_config(lora_alpha=8), LoraSettings(r=RANK, alpha=16), "says lora_alpha=8 but hubkit.json says 16"),
        (_config(r=8), None, "has rank 4 but the config says r=8"),
        (_config(peft_type="IA3"), None, "is not LoRA"),
        (_config(target_modules=["q_proj", "v_proj"]), None, r"k_proj has LoRA weights but target_modules"),
        (_config(target_modules=r".*\.q_proj"), None, r"k_proj has LoRA weights but target_modules"),
        # Read before any tensor is built: PEFT would allocate r x features for every module first.
        (_config(r=2**21), None, "every rank must be an integer from 1 to 65536"),
        (_config(rank_pattern={"q_proj": 2**21}), None, "every rank must be an integer from 1 to 65536"),
        (_config(r=float("inf")), None, "every rank must be an integer"),
        # A rank for a module the file holds no weights of: PEFT would allocate it all the same.
        (_config(rank_pattern={"lm_head": 60_000}), None, "names rank 60000, more than any LoRA weight has"),
        (_config(lora_alpha=float("nan")), None, "lora_alpha is nan"),
        (_config(lora_alpha=1e30), None, "lora_alpha 1e\\+30 is beyond"),
        (_config(peft_type="PROMPT_TUNING"), None, "is not LoRA"),
        (_config(use_dora=True), None, "use_dora is set but module .* has no lora_magnitude_vector"),
        (_config(layer_replication=[[0, 1]]), None, "uses layer replication"),
        (_config(target_modules=[1, 2]), None, "target_modules must be a module name"),
    ],
    ids=[
        "alpha-0",
        "alpha-disagrees",
        "rank",
        "not-lora",
        "untargeted-list",
        "untargeted-regex",
        "rank-2^21",
        "rank-pattern-2^21",
        "rank-inf",
        "rank-without-weights",
        "alpha-nan",
        "alpha-1e30",
        "prompt-tuning",
        "dora-without-magnitudes",
        "layer-replication",
        "targets-not-names",
    ],
)
def test_refuses_bad_config(tmp_path: Path, config, lora, message: str) -> None:
    _trl_run(tmp_path / "run", config=config, lora=lora)
    with pytest.raises(AdapterError, match=f"checkpoint-1 of run handmade: .*{message}"):
        _prepare(tmp_path / "run", tmp_path / "out")


def test_refuses_missing_config(tmp_path: Path) -> None:
    checkpoint = _trl_run(tmp_path / "run")
    (checkpoint / "adapter_config.json").unlink()
    with pytest.raises(AdapterError, match=r"checkpoint-1 of run handmade: no adapter_config\.json"):
        _prepare(tmp_path / "run", tmp_path / "out")


@pytest.mark.parametrize("keep_bytes", [4, 40, -10], ids=["no-header-length", "in-header", "in-data"])
def test_refuses_truncated_safetensors(tmp_path: Path, keep_bytes: int) -> None:
    checkpoint = _trl_run(tmp_path / "run")
    weights = checkpoint / "adapter_model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[:keep_bytes])
    with pytest.raises(
        AdapterError, match=r"checkpoint-1 of run handmade: adapter_model\.safetensors is truncated"
    ):
        _prepare(tmp_path / "run", tmp_path / "out")


class _Tripwire:
    """Unpickling this creates a marker file: proof that a pickle was (or was not) loaded."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_refuses_pickle_only_checkpoint_without_unpickling(tmp_path: Path) -> None:
    checkpoint = _trl_run(tmp_path / "run")
    (checkpoint / "adapter_model.safetensors").unlink()
    marker = tmp_path / "unpickled"
    (checkpoint / "adapter_model.bin").write_bytes(pickle.dumps({"weights": _Tripwire(marker)}))
    with pytest.raises(
        AdapterError, match=r"checkpoint-1 of run handmade: only adapter_model\.bin \(a pickle"
    ):
        _prepare(tmp_path / "run", tmp_path / "out")
    assert not marker.exists()


def test_refuses_incomplete_checkpoint(tmp_path: Path) -> None:
    _trl_run(tmp_path / "run")
    run = load_run(tmp_path / "run")
    pending = Checkpoint(5, tmp_path / "run" / "checkpoint-5", incomplete_reason="still being saved")
    with pytest.raises(CheckpointError, match="checkpoint-5 of run handmade is not complete"):
        prepare_adapter(run, pending, tmp_path / "out")


# --- one read: the data checked and the file hashed; the saved file published as it is ------------------


def test_weights_saved_in_peft_form_are_published_as_saved_and_hashed_in_the_read_that_checks_them(
    tmp_path: Path,
) -> None:
    saved = _trl_run(tmp_path / "run") / "adapter_model.safetensors"
    prepared = _prepare(tmp_path / "run", tmp_path / "out")
    published = prepared.dir / "adapter_model.safetensors"
    assert prepared.saved_weights_published
    assert published.read_bytes() == saved.read_bytes()
    assert (prepared.weights.size, prepared.weights.sha256) == (saved.stat().st_size, sha256_of(saved))
    assert hash_file(published).sha256 == prepared.weights.sha256


def test_keys_outside_peft_form_are_rewritten_around_the_saved_tensor_bytes(tmp_path: Path) -> None:
    saved = _trl_run(tmp_path / "run", tensors=_tensors(".default.weight")) / "adapter_model.safetensors"
    before = sha256_of(saved)
    prepared = _prepare(tmp_path / "run", tmp_path / "out")
    published = prepared.dir / "adapter_model.safetensors"
    assert not prepared.saved_weights_published
    assert (prepared.weights.size, prepared.weights.sha256) == (
        published.stat().st_size,
        sha256_of(published),
    )
    tensors, expected = load_file(published), _tensors()
    assert sorted(tensors) == sorted(expected) and all(torch.equal(tensors[k], expected[k]) for k in expected)
    assert sha256_of(saved) == before


def test_preparing_into_a_used_directory_never_writes_through_to_a_saved_checkpoint(tmp_path: Path) -> None:
    saved = _trl_run(tmp_path / "peft-form") / "adapter_model.safetensors"
    content = saved.read_bytes()
    _prepare(tmp_path / "peft-form", tmp_path / "out")  # out/ now holds the saved file itself
    _trl_run(tmp_path / "renamed", tensors=_tensors(".default.weight"))
    _prepare(tmp_path / "renamed", tmp_path / "out")  # rewritten into the same place
    assert saved.read_bytes() == content


def test_an_unchanged_checkpoint_is_not_read_again_and_a_resaved_one_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    weights = _trl_run(tmp_path / "run") / "adapter_model.safetensors"
    first = _prepare(tmp_path / "run", tmp_path / "out-1")
    assert [p.suffix for p in (tmp_path / "run" / ".hubkit" / "adapters").iterdir()] == [".json"]
    scans = []
    monkeypatch.setattr("hubkit.adapters.prepare.scan_weights", lambda *args, **kwargs: scans.append(args))
    second = _prepare(tmp_path / "run", tmp_path / "out-2")  # a later push: the run directory remembers
    assert scans == [] and second.weights == first.weights and second.config == first.config
    monkeypatch.undo()
    # The config changed, the weights did not: checked again (the verdict covers both).
    config = weights.parent / "adapter_config.json"
    saved_config = config.read_text()
    config.write_text(json.dumps(_config(lora_alpha=0)))
    with pytest.raises(AdapterError, match="lora_alpha is 0"):
        _prepare(tmp_path / "run", tmp_path / "out-alpha")
    config.write_text(saved_config)
    # Saved again with a diverged tensor, at the same size: read (and refused) again.
    tensors = _tensors()
    _with_nan(tensors)
    save_file(tensors, weights, metadata={"format": "pt"})  # as the first save
    assert weights.stat().st_size == first.weights.size
    with pytest.raises(AdapterError, match="NaN or Inf"):
        _prepare(tmp_path / "run", tmp_path / "out-3")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_every_float_dtype_is_checked_for_nan_and_for_a_zero_lora_b(
    tmp_path: Path, dtype: torch.dtype
) -> None:
    def saved(mutate: Callable[[dict[str, torch.Tensor]], None], name: str) -> Path:
        tensors = {k: v.to(dtype) for k, v in _tensors().items()}
        mutate(tensors)
        _trl_run(tmp_path / name, tensors=tensors)
        return tmp_path / name

    assert _prepare(saved(lambda t: None, "fine"), tmp_path / "fine-out").num_modules == 2
    last = "base_model.model.model.layers.0.self_attn.k_proj.lora_B.weight"
    with pytest.raises(AdapterError, match=f"{last} contains NaN or Inf"):
        _prepare(saved(lambda t: t[last].view(-1)[-1].fill_(float("nan")), "nan"), tmp_path / "nan-out")
    with pytest.raises(AdapterError, match="every lora_B is zero"):  # -0.0 is zero too
        _prepare(
            saved(lambda t: [v.fill_(-0.0) for k, v in t.items() if "lora_B" in k], "zero"), tmp_path / "z"
        )


def test_finite_values_whose_sum_overflows_are_not_taken_for_inf(tmp_path: Path) -> None:
    tensors = _tensors()
    tensors["base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"].fill_(3e38)
    _trl_run(tmp_path / "run", tensors=tensors)
    assert _prepare(tmp_path / "run", tmp_path / "out").num_modules == 2


@pytest.mark.parametrize("alongside_others", [False, True], ids=["hashed-on-another-thread", "hashed-inline"])
def test_reading_an_adapter_holds_two_chunks_whatever_its_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, alongside_others: bool
) -> None:
    monkeypatch.setattr("hubkit.adapters.weights_read.CHUNK_BYTES", 64 * 1024)
    monkeypatch.setattr("hubkit.adapters.weights_read.SAME_THREAD_CHUNK_BYTES", 64 * 1024)
    generator = torch.Generator().manual_seed(0)
    tensors = {}
    for layer in range(16):  # 32 tensors of 64 KiB: a 2 MiB file
        prefix = f"base_model.model.model.layers.{layer}.self_attn.q_proj"
        tensors[f"{prefix}.lora_A.weight"] = torch.randn(4, 4096, generator=generator)
        tensors[f"{prefix}.lora_B.weight"] = torch.randn(4096, 4, generator=generator)
    path = tmp_path / "adapter_model.safetensors"
    save_file(tensors, path)
    header = read_header(path)
    tracemalloc.start()
    try:
        hashes = scan_weights(
            path, header, {k for k in tensors if "lora_B" in k}, "big", alongside_others=alongside_others
        )
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert hashes.sha256 == sha256_of(path)
    assert peak < path.stat().st_size / 4, (
        f"{peak} bytes held while reading a {path.stat().st_size}-byte file"
    )


def test_adapters_read_together_are_hashed_on_their_reading_threads_and_one_new_one_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = make_run(tmp_path / "runs", (1, 2, 3), base_model=BASE_ID, shapes=TINY_SHAPES)
    reads: list[tuple[str, bool]] = []

    def recorded(path: Path, *args, alongside_others: bool = False, **kwargs):
        reads.append((path.parent.name, alongside_others))
        return scan_weights(path, *args, alongside_others=alongside_others, **kwargs)

    monkeypatch.setattr("hubkit.adapters.prepare.scan_weights", recorded)
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    run = load_run(run_dir)
    first = prepare_adapters(run, run.checkpoints, tmp_path / "staging-1")
    assert sorted(reads) == [(f"checkpoint-{s}", True) for s in (1, 2, 3)]
    for adapter in first:
        saved = run_dir / f"checkpoint-{adapter.step}" / "adapter_model.safetensors"
        assert adapter.weights.sha256 == sha256_of(saved)
    reads.clear()
    write_checkpoint(run_dir, 4, base_model=BASE_ID, shapes=TINY_SHAPES)
    run = load_run(run_dir)
    prepare_adapters(run, run.checkpoints, tmp_path / "staging-2")
    assert reads == [("checkpoint-4", False)]  # the others are remembered: it is read alone


def test_verl_shards_outside_the_allow_list_are_refused_unloaded(tmp_path: Path) -> None:
    actor = tmp_path / "global_step_1" / "actor"
    actor.mkdir(parents=True)
    (actor / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": 1}))
    marker = tmp_path / "unpickled"
    torch.save({"m.lora_A.default.weight": _Tripwire(marker)}, actor / "model_world_size_1_rank_0.pt")
    with pytest.raises(
        CheckpointError, match=r"global_step_1: model_world_size_1_rank_0\.pt holds objects outside"
    ):
        load_lora_tensors(actor, "global_step_1")
    assert not marker.exists()
    (actor / "model_world_size_1_rank_0.pt").unlink()
    with pytest.raises(
        CheckpointError, match=r"global_step_1: shard model_world_size_1_rank_0\.pt is missing"
    ):
        load_lora_tensors(actor, "global_step_1")


# --- against the base model on the local Hub ------------------------------------------------------


def _handmade_adapter(tmp_path: Path, tensors: dict[str, torch.Tensor]) -> Path:
    out = tmp_path / "adapter"
    out.mkdir(parents=True)
    save_file(tensors, out / "adapter_model.safetensors")
    (out / "adapter_config.json").write_text(json.dumps(_config()))
    return out


def test_check_against_base_accepts_matching_shapes_from_config_only(
    tmp_path: Path, tiny_qwen3, local_hub
) -> None:
    assert tiny_qwen3.repo_id == BASE_ID
    logged = len(local_hub.request_log)
    check_against_base(_handmade_adapter(tmp_path, _tensors()), _base(BASE_ID))
    fetched = [path for _, path, _ in local_hub.request_log[logged:]]
    assert not any(path.endswith(".safetensors") for path in fetched)  # no weights downloaded


def test_a_passing_check_against_the_base_is_remembered_per_file_version(
    tmp_path: Path, tiny_qwen3, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = _handmade_adapter(tmp_path, _tensors())
    run_dir = tmp_path / "run"
    check_against_base(adapter, _base(BASE_ID), run_dir=run_dir)
    assert len(list((run_dir / ".hubkit" / "base-checks").iterdir())) == 1
    headers = []
    monkeypatch.setattr("hubkit.adapters.base_check.read_weights_header", lambda *args: headers.append(args))
    check_against_base(adapter, _base(BASE_ID), run_dir=run_dir)  # remembered: the header is not read
    assert headers == []
    monkeypatch.undo()
    # Saved again, with a module the base does not have: checked again, and refused.
    tensors = _tensors()
    tensors["base_model.model.model.layers.9.mlp.up_proj.lora_A.weight"] = torch.ones(RANK, 64)
    tensors["base_model.model.model.layers.9.mlp.up_proj.lora_B.weight"] = torch.ones(128, RANK)
    save_file(tensors, adapter / "adapter_model.safetensors")
    with pytest.raises(BaseModelMismatchError, match="does not exist"):
        check_against_base(adapter, _base(BASE_ID), run_dir=run_dir)


def test_the_bases_shapes_are_remembered_in_the_run_and_a_new_adapter_is_checked_against_them(
    tmp_path: Path, tiny_qwen3, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new checkpoint against a base already seen builds no model (no transformers), and is still checked."""
    run_dir = tmp_path / "run"
    check_against_base(_handmade_adapter(tmp_path / "a", _tensors()), _base(BASE_ID), run_dir=run_dir)
    (remembered,) = (run_dir / ".hubkit" / "base-shapes").iterdir()
    built = []
    monkeypatch.setattr("hubkit.adapters.base_check.linear_shapes", lambda path: built.append(path))
    check_against_base(_handmade_adapter(tmp_path / "b", _tensors()), _base(BASE_ID), run_dir=run_dir)
    tensors = _tensors()
    tensors["base_model.model.model.layers.0.self_attn.k_proj.lora_B.weight"] = torch.ones(64, RANK)
    with pytest.raises(BaseModelMismatchError, match=r"k_proj\.lora_B has shape \(64, 4\).*64->32"):
        check_against_base(_handmade_adapter(tmp_path / "c", tensors), _base(BASE_ID), run_dir=run_dir)
    assert built == []
    # An unreadable record is built again, and written anew.
    remembered.write_text("{not json")
    monkeypatch.undo()
    check_against_base(_handmade_adapter(tmp_path / "d", _tensors()), _base(BASE_ID), run_dir=run_dir)
    assert json.loads(remembered.read_text())["linears"]


def test_check_against_base_refuses_wrong_shape(tmp_path: Path, tiny_qwen3) -> None:
    tensors = _tensors()
    tensors["base_model.model.model.layers.0.self_attn.k_proj.lora_B.weight"] = torch.ones(64, RANK)
    adapter = _handmade_adapter(tmp_path, tensors)
    with pytest.raises(
        BaseModelMismatchError, match=r"global_step_7: .*k_proj\.lora_B has shape \(64, 4\).*64->32"
    ):
        check_against_base(adapter, _base(BASE_ID), label="global_step_7")


def test_check_against_base_refuses_unknown_module(tmp_path: Path, tiny_qwen3) -> None:
    tensors = _tensors()
    tensors["base_model.model.model.layers.9.mlp.up_proj.lora_A.weight"] = torch.ones(RANK, 64)
    tensors["base_model.model.model.layers.9.mlp.up_proj.lora_B.weight"] = torch.ones(128, RANK)
    adapter = _handmade_adapter(tmp_path, tensors)
    with pytest.raises(
        BaseModelMismatchError, match=r"adapter: module model\.layers\.9\.mlp\.up_proj does not exist"
    ):
        check_against_base(adapter, _base(BASE_ID))


def test_check_against_base_refuses_missing_base(tmp_path: Path, local_hub) -> None:
    adapter = _handmade_adapter(tmp_path, _tensors())
    with pytest.raises(RepoNotFoundError, match=r"hubkit-test/no-such-model is not on the Hub"):
        check_against_base(adapter, _base("hubkit-test/no-such-model"))


# --- real runs: logits ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_base(tiny_qwen3):
    """A loader of fresh copies of the tiny base (PEFT wraps the model it is given in place)."""
    from transformers import AutoModelForCausalLM

    def load() -> torch.nn.Module:
        return AutoModelForCausalLM.from_pretrained(tiny_qwen3.local_dir, dtype=torch.float32).eval()

    return load


@pytest.mark.slow
def test_trl_prepared_adapters_match_the_saved_checkpoints(
    trl_run_dir: Path, tmp_path: Path, tiny_base, tiny_qwen3
) -> None:
    from peft import PeftModel

    run = load_run(trl_run_dir)
    input_ids = torch.tensor([[151644, 872, 198, 3838, 374, 220, 17, 488, 220, 18, 30, 151645]])
    base_logits = logits(tiny_base(), input_ids)
    for checkpoint in run.checkpoints:
        prepared = prepare_adapter(run, checkpoint, tmp_path / checkpoint.name)
        assert not prepared.rebuilt and prepared.num_modules == 2 * 7  # 2 layers x 7 projections
        assert prepared.config["base_model_name_or_path"] == run.manifest.base_model
        saved_config = json.loads((checkpoint.path / "adapter_config.json").read_text())
        assert saved_config["base_model_name_or_path"] != run.manifest.base_model  # TRL saved the local path
        check_against_base(prepared.dir, _base(run.manifest.base_model), label=checkpoint.name)
        assert str(tiny_qwen3.local_dir) not in (prepared.dir / "adapter_config.json").read_text()
        published = logits(PeftModel.from_pretrained(tiny_base(), prepared.dir), input_ids)
        trained = logits(PeftModel.from_pretrained(tiny_base(), checkpoint.path), input_ids)
        assert torch.equal(published, trained)
        assert (published - base_logits).abs().max() > 1e-3, f"{checkpoint.name} loads as a no-op"


def _verl_reference(run_dir: Path, checkpoint: Checkpoint) -> dict[str, torch.Tensor]:
    return torch.load(verl_reference_dir(run_dir) / f"{checkpoint.name}.pt")


def _assert_verllogits(
    run_dir: Path, run, tmp_path: Path, tiny_base, expect_rebuilt: dict[int, bool]
) -> None:
    from peft import PeftModel

    for checkpoint in run.checkpoints:
        prepared = prepare_adapter(run, checkpoint, tmp_path / "prepared" / run_dir.name / checkpoint.name)
        assert prepared.rebuilt is expect_rebuilt[checkpoint.step], checkpoint.name
        assert prepared.config["base_model_name_or_path"] == run.manifest.base_model
        assert prepared.config["lora_alpha"] == VERL_LORA_ALPHA and prepared.config["r"] == VERL_LORA_R
        check_against_base(prepared.dir, _base(run.manifest.base_model), label=checkpoint.name)
        reference = _verl_reference(run_dir, checkpoint)
        published = logits(PeftModel.from_pretrained(tiny_base(), prepared.dir), reference["input_ids"])
        base = logits(tiny_base(), reference["input_ids"])
        # The reference is the adapter verl saved, loaded the same way: equal up to float rounding.
        torch.testing.assert_close(published, reference["logits"], atol=1e-5, rtol=1e-5)
        assert (published - base).abs().max() > 1e-3, f"{checkpoint.name} loads as a no-op"


@pytest.mark.slow
@pytest.mark.verl
def test_verl_saved_adapters_match_the_trained_model(verl_run_dir: Path, tmp_path: Path, verl_base) -> None:
    run = load_run(verl_run_dir)
    assert [c.step for c in run.checkpoints] == [1, 2]
    _assert_verllogits(verl_run_dir, run, tmp_path, verl_base, {1: False, 2: False})
    for checkpoint in run.checkpoints:  # the shards hold exactly the adapter verl saved on rank 0
        saved = load_file(checkpoint.adapter_dir / "adapter_model.safetensors")
        rebuilt = {normalize_key(k): v for k, v in load_lora_tensors(checkpoint.path / "actor", "x").items()}
        assert sorted(saved) == sorted(rebuilt)
        assert all(torch.equal(saved[k], rebuilt[k]) for k in saved)


@pytest.mark.slow
@pytest.mark.verl
def test_verl_empty_adapter_is_rebuilt_from_shards(
    verl_empty_adapter_run_dir: Path, tmp_path: Path, verl_base
) -> None:
    run_dir = verl_empty_adapter_run_dir
    empty = run_dir / "global_step_1/actor/lora_adapter/adapter_model.safetensors"
    assert empty.stat().st_size == 16  # what verl 0.6.1 writes with PEFT >= 0.21
    _assert_verllogits(run_dir, load_run(run_dir), tmp_path, verl_base, {1: True, 2: False})


@pytest.mark.slow
@pytest.mark.verl
def test_verl_missing_adapter_is_rebuilt_with_lora_train_meta(
    verl_no_adapter_run_dir: Path, tmp_path: Path, verl_base, tiny_qwen3_tied
) -> None:
    # As a plain verl run without hubkit.json: the checkpoints directory itself, r/alpha from lora_train_meta.json.
    plain = copy_verl_run(verl_no_adapter_run_dir, tmp_path / "plain")
    (plain / "hubkit.json").unlink()
    run = load_run(plain, base_model=tiny_qwen3_tied.repo_id)
    assert run.manifest.lora is not None
    assert (run.manifest.lora.r, run.manifest.lora.alpha) == (VERL_LORA_R, VERL_LORA_ALPHA)
    assert all(c.adapter_dir is None for c in run.checkpoints)
    _assert_verllogits(plain, run, tmp_path, verl_base, {1: True, 2: True})


@pytest.mark.slow
@pytest.mark.verl
def test_verl_rebuild_needs_lora_settings_and_whole_shards(verl_run_dir: Path, tmp_path: Path) -> None:
    run_dir = copy_verl_run(verl_run_dir, tmp_path / "no-settings")
    manifest = Manifest.load(run_dir)
    manifest.with_updates(lora=None).save(run_dir)
    actor = run_dir / "global_step_1/actor"
    shutil.rmtree(actor / "lora_adapter")
    run = load_run(run_dir)
    with pytest.raises(CheckpointError, match=r"global_step_1 of run .*LoRA r/alpha are unknown"):
        prepare_adapter(run, run.checkpoints[0], tmp_path / "out")
    manifest.save(run_dir)
    shard = actor / "model_world_size_2_rank_1.pt"
    shard.write_bytes(shard.read_bytes()[:1000])
    run = load_run(run_dir)
    with pytest.raises(
        CheckpointError, match=r"global_step_1 of run .*: model_world_size_2_rank_1\.pt cannot be read"
    ):
        prepare_adapter(run, run.checkpoints[0], tmp_path / "out2")


@pytest.mark.slow
@pytest.mark.verl
def test_verl_alpha_zero_adapter_is_rebuilt_with_the_real_alpha(
    verl_run_dir: Path, tmp_path: Path, verl_base
) -> None:
    # verl 0.6.1's model merger writes lora_alpha 0 and no task type: a no-op adapter if published as is.
    run_dir = copy_verl_run(verl_run_dir, tmp_path / "alpha-zero")
    config_path = run_dir / "global_step_2/actor/lora_adapter/adapter_config.json"
    config = json.loads(config_path.read_text())
    config.update(lora_alpha=0, task_type=None)
    config_path.write_text(json.dumps(config))
    _assert_verllogits(run_dir, load_run(run_dir), tmp_path, verl_base, {1: False, 2: True})
