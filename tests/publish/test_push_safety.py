"""A run directory is untrusted input, at the push: every row of issue 23's table and each kind of secret,
planted one per run in a TRL-layout run pushed to the local Hub with the real huggingface_hub client.

The push either refuses in one line naming the file and what it holds, before any repo is created (the
Hub's repos are listed before and after), or publishes files in which nothing planted survives (checked
on what is downloaded back, decoded: JSON parsed, safetensors headers read, text as text). A real TRL
run (GRPOTrainer's own checkpoints) pushes with no refusal and no local path, with HF_TOKEN a short word.
"""

from __future__ import annotations

import json
import resource
import shutil
import struct
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import run_cli
from huggingface_hub import HfApi, get_token, snapshot_download
from planted import HF_TOKEN, planted_secrets
from safetensors.numpy import load_file, save_file
from tokenizers import Tokenizer
from tokenizers.models import WordLevel

from hubkit.errors import (
    AmbiguousCheckpointError,
    ForeignCheckpointsError,
    LocalPathInFileError,
    OversizedFileError,
    SecretInFileError,
    UnsafeLinkError,
)
from hubkit.formats.parquet import read_table, string_cells
from hubkit.formats.tensorboard import read_scalars
from hubkit.localhub import LocalHub
from hubkit.publish import PushRequest, push_run
from hubkit.publish.vetted import Vetter
from hubkit.runs.manifest import Manifest
from hubkit.safety import VetContext, kinds
from tests.support.runs import TINY_SHAPES, make_run
from tests.support.tiny import TinyModel, publish_model

# Planted secrets, built from parts so that no scanner flags this file itself. The token in use is the
# session Hub's (`fixtures_hub.TEST_TOKEN`), which every push here sends.
SECRETS = planted_secrets("hf_hubkit_local_" + "test_token")
STEP = 10


def _key_parts(secret: str) -> list[str]:
    """What of a planted secret must not survive anywhere: the last 16 characters of each of its lines."""
    return [line.strip()[-16:] for line in secret.splitlines() if line.strip()]


# --- the run, the Hub, and what is downloaded back ---------------------------------------------------


def _small_tokenizer(folder: Path) -> None:
    """A small real tokenizer (`tokenizers` loads it), a tokenizer config and a chat template.

    The config names its class, as every `save_pretrained` writes it: without it, AutoTokenizer picks the class
    from a folder's config.json, so the merged folder would load another tokenizer than the adapter's (and the
    push's check refuses it, as it should)."""
    folder.mkdir(parents=True, exist_ok=True)
    vocab = {"[UNK]": 0, "<|im_start|>": 1, "<|im_end|>": 2, "hello": 3}
    (folder / "tokenizer.json").write_text(Tokenizer(WordLevel(vocab, unk_token="[UNK]")).to_str())
    (folder / "tokenizer_config.json").write_text(
        json.dumps(
            {"model_max_length": 64, "eos_token": "<|im_end|>", "tokenizer_class": "PreTrainedTokenizerFast"}
        )
    )
    (folder / "chat_template.jinja").write_text(
        "{% for m in messages %}<|im_start|>{{ m.content }}{% endfor %}"
    )


@pytest.fixture
def tokenizer_dir(tmp_path: Path) -> Path:
    _small_tokenizer(tmp_path / "tokenizer")
    return tmp_path / "tokenizer"


@pytest.fixture
def run_dir(tmp_path: Path, tiny_qwen3: TinyModel, tokenizer_dir: Path) -> Path:
    """A TRL-layout run: one checkpoint with its adapter, tokenizer, trainer state and optimizer state."""
    return make_run(
        tmp_path / "runs",
        (STEP,),
        base_model=tiny_qwen3.repo_id,
        shapes=TINY_SHAPES,
        tokenizer_dir=tokenizer_dir,
    )


def _repos(api: HfApi) -> set[str]:
    """Every repo on the Hub: models, datasets and Spaces."""
    return {r.id for lister in (api.list_models, api.list_datasets, api.list_spaces) for r in lister()}


def _request(run_dir: Path, repo_id: str, hub: LocalHub, **options: bool) -> PushRequest:
    return PushRequest(run_dir=run_dir, repo_id=repo_id, endpoint=hub.endpoint, token=hub.token, **options)


def _assert_refused(request: PushRequest, hub_api: HfApi, error: type[Exception], *parts: str) -> str:
    """The push refuses with one line holding `parts`, and the Hub holds exactly the repos it held."""
    before = _repos(hub_api)
    with pytest.raises(error) as refused:
        push_run(request)
    message = str(refused.value)
    assert "\n" not in message and message.startswith("refusing to publish"), message
    for part in parts:
        assert part in message, message
    assert _repos(hub_api) == before, "a refused push created a repo"
    return message


def _strings(value: object) -> Iterator[str]:
    """Every string of a parsed JSON value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, child in value.items():
            yield key
            yield from _strings(child)
    elif isinstance(value, list):
        for child in value:
            yield from _strings(child)


def _decoded(path: Path) -> Iterator[str]:
    """What a reader of the file gets back: JSON values parsed (escapes decoded), a safetensors header
    parsed, text as text; and the raw bytes as Latin-1, whatever the file."""
    data = path.read_bytes()
    yield data.decode("latin-1")
    if path.suffix == ".safetensors":
        (length,) = struct.unpack("<Q", data[:8])
        yield from _strings(json.loads(data[8 : 8 + length]))
    elif path.suffix == ".json":
        yield from _strings(json.loads(data))
    elif path.suffix == ".jsonl":
        for line in data.decode().splitlines():
            yield from _strings(json.loads(line))
    elif "tfevents" in path.name:
        yield from read_scalars(path).points  # the tags, TensorBoard's only strings
    elif path.suffix == ".parquet":
        yield from string_cells(read_table(data, path.name))
    elif path.suffix != ".png":
        yield data.decode("utf-8")


def _downloaded(
    repo_id: str,
    hub: LocalHub,
    tmp_path: Path,
    repo_type: str = "model",
    token: str | None = None,
    revision: str | None = None,
) -> dict[str, Path]:
    """Every file of the repo (at `revision`: a branch), downloaded back with the real client, by path."""
    folder = Path(
        snapshot_download(
            repo_id,
            repo_type=repo_type,
            revision=revision,
            endpoint=hub.endpoint,
            token=token or hub.token,
            local_dir=tmp_path / "down" / repo_id / (revision or "main"),
        )
    )
    return {
        p.relative_to(folder).as_posix(): p
        for p in folder.rglob("*")
        if p.is_file() and ".cache" not in p.relative_to(folder).parts
    }


def _assert_nothing_survives(files: dict[str, Path], planted: list[str]) -> None:
    assert files, "nothing was published"
    for path_in_repo, path in files.items():
        for text in _decoded(path):
            for thing in planted:
                assert thing not in text, f"{path_in_repo} holds {thing!r}"


# --- the matrix: each planted thing, refused or published clean ---------------------------------------


@dataclass(frozen=True)
class Case:
    """One planted thing: how it is planted, and what the push must do with it.

    Attributes:
        plant: plants it in the run (run_dir, tmp_path) and returns what must not survive.
        refused: the error of a refusal; None when the push publishes, cleaned.
        says: what the refusal's one line names (the file, what it holds).
        check: for a published case, more to check on the downloaded files.
    """

    plant: Callable[[Path, Path], list[str]]
    refused: type[Exception] | None = None
    says: tuple[str, ...] = ()
    check: Callable[[dict[str, Path]], None] | None = None


def _checkpoint(run_dir: Path) -> Path:
    return run_dir / f"checkpoint-{STEP}"


def _rewrite_json(path: Path, change: Callable[[dict], None]) -> None:
    value = json.loads(path.read_text())
    change(value)
    path.write_text(json.dumps(value))


def _resave_weights(run_dir: Path, metadata: dict[str, str]) -> None:
    path = _checkpoint(run_dir) / "adapter_model.safetensors"
    save_file(load_file(path), path, metadata=metadata)


def _secret_in(place: str, secret: str) -> Callable[[Path, Path], list[str]]:
    def plant(run_dir: Path, _tmp: Path) -> list[str]:
        checkpoint = _checkpoint(run_dir)
        if place == "tokenizer config":
            _rewrite_json(checkpoint / "tokenizer_config.json", lambda c: c.update(note=secret))
        elif place == "chat template":
            (checkpoint / "chat_template.jinja").write_text("{# " + secret + " #}{{ messages }}")
        elif place == "manifest":
            Manifest.load(run_dir).with_updates(system_prompt=f"Answer briefly. {secret}").save(run_dir)
        elif place == "eval results":
            (run_dir / "eval").mkdir()
            (run_dir / "eval" / "results.json").write_text(json.dumps({"note": secret}))
        elif place == "metric name":
            state = checkpoint / "trainer_state.json"
            _rewrite_json(state, lambda s: s["log_history"].append({"step": STEP, secret: 1.0}))
        elif place == "adapter metadata":
            _resave_weights(run_dir, {"format": "pt", "note": secret})
        elif place == "adapter config field":
            _rewrite_json(checkpoint / "adapter_config.json", lambda c: c.update(training_note=secret))
        elif place == "unknown file":
            (checkpoint / "notes.txt").write_text(secret)
        return _key_parts(secret)

    return plant


# Where a secret is refused (a file of a known kind holds it), and where it is dropped (a field or metadata
# key PEFT and safetensors do not read, a file of no known kind: left out).
REFUSED_PLACES = {
    "tokenizer config": f"checkpoint-{STEP}/tokenizer_config.json",
    "chat template": f"checkpoint-{STEP}/chat_template.jinja",
    "manifest": "hubkit.json",
    "eval results": "eval/results.json",
    "metric name": "metrics.jsonl",
}
CLEANED_PLACES = ("adapter metadata", "adapter config field", "unknown file")


def _secret_cases() -> dict[str, Case]:
    cases = {}
    for kind, (secret, what) in SECRETS.items():
        for place, file in REFUSED_PLACES.items():
            cases[f"{kind} in {place}"] = Case(
                _secret_in(place, secret), SecretInFileError, (file, f"it holds {what}")
            )
        for place in CLEANED_PLACES:
            cases[f"{kind} in {place}"] = Case(_secret_in(place, secret))
    return cases


def _merges_linked_to_a_key(run_dir: Path, tmp: Path) -> list[str]:
    key = tmp / "home" / ".ssh" / "id_ed25519"
    key.parent.mkdir(parents=True)
    key.write_text(SECRETS["private_key"][0])
    (_checkpoint(run_dir) / "merges.txt").symlink_to(key)
    return _key_parts(SECRETS["private_key"][0])


def _checkpoints_linked_to_another_run(run_dir: Path, tmp: Path) -> list[str]:
    other = make_run(
        tmp / "other-runs", (20,), base_model=Manifest.load(run_dir).base_model, shapes=TINY_SHAPES
    )
    Manifest.load(run_dir).with_updates(checkpoints_dir="checkpoints").save(run_dir)
    (run_dir / "checkpoints").symlink_to(other)
    return []


def _checkpoint_linked_to_another_run(run_dir: Path, tmp: Path) -> list[str]:
    other = make_run(
        tmp / "other-runs", (20,), base_model=Manifest.load(run_dir).base_model, shapes=TINY_SHAPES
    )
    (run_dir / "checkpoint-20").symlink_to(other / "checkpoint-20")
    return []


def _escaped_token(run_dir: Path, _tmp: Path) -> list[str]:
    config = _checkpoint(run_dir) / "tokenizer_config.json"
    escaped = json.dumps(HF_TOKEN).replace("_", "\\u005f")
    config.write_text(
        config.read_text().replace('{"model_max_length"', '{"auth": ' + escaped + ', "model_max_length"')
    )
    assert HF_TOKEN not in config.read_text()  # hidden from a raw-byte scan
    return _key_parts(HF_TOKEN)


def _model_path(path: str) -> Callable[[Path, Path], list[str]]:
    def plant(run_dir: Path, _tmp: Path) -> list[str]:
        checkpoint = _checkpoint(run_dir)
        _rewrite_json(checkpoint / "tokenizer_config.json", lambda c: c.update(name_or_path=path))
        _rewrite_json(checkpoint / "adapter_config.json", lambda c: c.update(base_model_name_or_path=path))
        return [path]

    return plant


def _names_the_hub_id(files: dict[str, Path]) -> None:
    base = json.loads(files["hubkit.json"].read_text())["base_model"]
    assert json.loads(files["tokenizer_config.json"].read_text())["name_or_path"] == base
    assert json.loads(files["adapter_config.json"].read_text())["base_model_name_or_path"] == base


def _local_path_field(path: str) -> Callable[[Path, Path], list[str]]:
    def plant(run_dir: Path, _tmp: Path) -> list[str]:
        _rewrite_json(_checkpoint(run_dir) / "tokenizer_config.json", lambda c: c.update(cache_dir=path))
        return [path]

    return plant


def _token_and_path_in_metadata(run_dir: Path, _tmp: Path) -> list[str]:
    _resave_weights(run_dir, {"format": "pt", "hf_token": HF_TOKEN, "output_dir": "/root/runs/grpo-7"})
    return [*_key_parts(HF_TOKEN), "/root/runs/grpo-7"]


def _only_format_metadata(files: dict[str, Path]) -> None:
    for path_in_repo in (
        "adapter_model.safetensors",
        f"checkpoints/global_step_{STEP}/adapter_model.safetensors",
    ):
        data = files[path_in_repo].read_bytes()
        (length,) = struct.unpack("<Q", data[:8])
        assert json.loads(data[8 : 8 + length])["__metadata__"] == {"format": "pt"}
    assert load_file(files["adapter_model.safetensors"]).keys()  # the tensors are all there, readable


def _sparse_tokenizer(run_dir: Path, _tmp: Path) -> list[str]:
    with (_checkpoint(run_dir) / "tokenizer.json").open("wb") as f:
        f.truncate(2_000_000_000)  # 2 GB of zeros, no disk
    return []


def _junk_config(size: int) -> Callable[[Path, Path], list[str]]:
    junk = "x" * (size - 16) + "JUNKEND"

    def plant(run_dir: Path, _tmp: Path) -> list[str]:
        _rewrite_json(_checkpoint(run_dir) / "adapter_config.json", lambda c: c.update(junk=junk))
        return [junk[-200:]]

    return plant


def _same_step_twice(run_dir: Path, _tmp: Path) -> list[str]:
    shutil.copytree(_checkpoint(run_dir), run_dir / f"checkpoint-00{STEP}")
    return []


def _environ_as(name: str) -> Callable[[Path, Path], list[str]]:
    def plant(run_dir: Path, _tmp: Path) -> list[str]:
        path = _checkpoint(run_dir) / name
        path.unlink(missing_ok=True)
        path.symlink_to("/proc/self/environ")
        return [*_key_parts(SECRETS["token_in_use"][0]), "HF_ENDPOINT="]

    return plant


ROWS: dict[str, Case] = {
    "merges.txt linked to a private key": Case(
        _merges_linked_to_a_key, SecretInFileError, ("merges.txt", "not a merges file", "a private key block")
    ),
    "checkpoints folder linked to another run": Case(
        _checkpoints_linked_to_another_run,
        ForeignCheckpointsError,
        ("checkpoints/", "outside the run directory"),
    ),
    "a checkpoint folder linked to another run's": Case(
        _checkpoint_linked_to_another_run,
        ForeignCheckpointsError,
        ("checkpoint-20", "outside the run's checkpoints"),
    ),
    "JSON-escaped token in tokenizer_config.json": Case(
        _escaped_token, SecretInFileError, ("tokenizer_config.json", "a Hugging Face token", "field auth")
    ),
    **{
        f"name_or_path {path}": Case(_model_path(path), check=_names_the_hub_id)
        for path in ("/home/alice/models/qwen", "/scratch/u4242/qwen3-0.6b", "/Users/alice/models/qwen")
    },
    "a /home path in another field": Case(
        _local_path_field("/home/alice/.cache/tok"),
        LocalPathInFileError,
        ("tokenizer_config.json", "/home", "cache_dir"),
    ),
    "a C:\\Users path in another field": Case(
        _local_path_field("C:\\Users\\alice\\tok"),
        LocalPathInFileError,
        ("tokenizer_config.json", "a Windows path"),
    ),
    "token and /root path in the adapter's metadata": Case(
        _token_and_path_in_metadata, check=_only_format_metadata
    ),
    "2 GB sparse tokenizer.json": Case(
        _sparse_tokenizer, OversizedFileError, ("tokenizer.json", "2000.0 MB")
    ),
    "10 MB of junk in adapter_config.json": Case(
        _junk_config(10_000_000), OversizedFileError, ("adapter_config.json",)
    ),
    "300 KB of junk in adapter_config.json": Case(_junk_config(300_000)),
    "checkpoint-10 and a copy checkpoint-0010": Case(
        _same_step_twice, AmbiguousCheckpointError, ("step 10", "checkpoint-10", "checkpoint-0010")
    ),
    "tokenizer_config.json linked to /proc/self/environ": Case(
        _environ_as("tokenizer_config.json"), UnsafeLinkError, ("tokenizer_config.json", "under /proc")
    ),
    "an unknown file linked to /proc/self/environ": Case(_environ_as("environ")),
}
# Where clusters keep checkpoints: each is a local path by its shape, in any file a push would publish.
CLUSTER_PATHS = {
    "/raid/alice/qwen3": "/raid",
    "/global/homes/a/alice/ckpt": "/global",
    "/pscratch/sd/a/alice/ckpt": "/pscratch",
    "/scratch1/u123/ckpt": "/scratch1",
    "/home1/u123/ckpt": "/home1",
    "/lus/grand/projects/lab/ckpt": "/lus",
    "/p/project/lab/ckpt": "/p",
    "/checkpoint/alice/ckpt": "/checkpoint",
    "/export/home/alice/ckpt": "/export",
}


def _cluster_path_cases() -> dict[str, Case]:
    return {
        f"{path} in {place}": Case(
            _secret_in(place, path), LocalPathInFileError, (file, f"a path under {root}")
        )
        for path, root in CLUSTER_PATHS.items()
        for place, file in REFUSED_PLACES.items()
        if place in ("tokenizer config", "chat template", "manifest")
    }


CASES = {**ROWS, **_secret_cases(), **_cluster_path_cases()}


@pytest.mark.parametrize("name", list(CASES))
def test_a_planted_thing_is_refused_before_any_repo_or_published_clean(
    name: str, run_dir: Path, tmp_path: Path, local_hub: LocalHub, hub_api: HfApi, new_repo_id: str
) -> None:
    case = CASES[name]
    planted = case.plant(run_dir, tmp_path)
    if case.refused is not None:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        # The merged model and the Space are asked for too: nothing of them may exist either.
        _assert_refused(_request(run_dir, new_repo_id, local_hub), hub_api, case.refused, *case.says)
        # A refusal reads nothing it refuses (a 2 GB file is refused from its size): no new peak of memory.
        assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 200_000  # KiB
        return
    push_run(_request(run_dir, new_repo_id, local_hub, merged=False, space=False))
    files = _downloaded(new_repo_id, local_hub, tmp_path)
    _assert_nothing_survives(files, planted)
    _assert_nothing_survives(_downloaded(new_repo_id, local_hub, tmp_path, revision=f"step-{STEP}"), planted)
    assert {"adapter_model.safetensors", "adapter_config.json", "tokenizer.json", "hubkit.json"} <= set(files)
    if case.check is not None:
        case.check(files)


def test_the_matrix_covers_every_row_and_every_secret_kind_in_every_place(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Its figures: each case above either refuses or publishes clean (a leak fails its test)."""
    for kind in SECRETS:
        assert {f"{kind} in {place}" for place in (*REFUSED_PLACES, *CLEANED_PLACES)} <= set(CASES)
    refused = sum(1 for case in CASES.values() if case.refused is not None)
    with capsys.disabled():
        print(
            f"\npush safety matrix: {len(CASES)} cases, {refused} refused before any repo, "
            f"{len(CASES) - refused} published clean"
        )


# --- a named checkpoints tree, the merged repo and the Space, and the base's own files -----------------


def test_a_checkpoints_tree_outside_the_run_is_published_when_named_and_the_dry_run_says_where(
    run_dir: Path, tmp_path: Path, local_hub: LocalHub, hub_api: HfApi, new_repo_id: str, capsys
) -> None:
    scratch = tmp_path / "scratch" / "grpo-checkpoints"
    scratch.parent.mkdir()
    shutil.move(_checkpoint(run_dir), scratch / f"checkpoint-{STEP}")
    Manifest.load(run_dir).with_updates(checkpoints_dir="checkpoints").save(run_dir)
    (run_dir / "checkpoints").symlink_to(scratch)
    argv = ["push", "--run-dir", str(run_dir), "--repo-id", new_repo_id, "--endpoint", local_hub.endpoint]
    argv += ["--no-merged", "--no-space"]
    assert run_cli([*argv, "--dry-run"]) == 1  # not named: refused
    assert "outside the run directory" in capsys.readouterr().err
    assert (
        run_cli([*argv, "--dry-run", "--checkpoints-dir", str(tmp_path / "elsewhere")]) == 2
    )  # no such folder
    capsys.readouterr()
    assert run_cli([*argv, "--dry-run", "--checkpoints-dir", str(scratch)]) == 0
    out = capsys.readouterr().out
    assert f"Checkpoints from {scratch.resolve()} (outside the run directory" in out
    assert "optimizer.pt" in out.split("Left out of", 1)[1]  # what is left out of the folder, and why
    assert new_repo_id not in _repos(hub_api)
    assert run_cli([*argv, "--quiet", "--checkpoints-dir", str(scratch)]) == 0
    assert f"checkpoints/global_step_{STEP}/adapter_model.safetensors" in hub_api.list_repo_files(new_repo_id)


@pytest.mark.parametrize("planted", ["config", "card"])
def test_a_refusal_of_what_the_base_gives_comes_before_any_repo_of_a_merging_push(
    planted: str,
    tmp_path: Path,
    tiny_qwen3: TinyModel,
    local_hub: LocalHub,
    hub_api: HfApi,
    make_repo_id,
    tokenizer_dir: Path,
) -> None:
    base_dir = tmp_path / "base"
    shutil.copytree(tiny_qwen3.local_dir, base_dir)
    if planted == "config":  # the folder it was exported from: the merged repo would publish it
        _rewrite_json(base_dir / "config.json", lambda c: c.update(export_dir="/scratch/alice/export/qwen"))
    else:  # a licence named by a key: both cards would say it
        (base_dir / "README.md").write_text(f"---\nlicense: other\nlicense_name: {HF_TOKEN}\n---\n# Base\n")
    base = publish_model(hub_api, base_dir, make_repo_id("base"))
    run = make_run(
        tmp_path / "runs", (STEP,), base_model=base.repo_id, shapes=TINY_SHAPES, tokenizer_dir=tokenizer_dir
    )
    error, says = {
        "config": (LocalPathInFileError, (f"config.json of base model {base.repo_id}", "export_dir")),
        "card": (
            SecretInFileError,
            (f"the licence on the card of base model {base.repo_id}", "a Hugging Face token"),
        ),
    }[planted]
    _assert_refused(_request(run, make_repo_id("adapter"), local_hub), hub_api, error, *says)


def test_a_session_vets_each_version_of_a_file_once(run_dir: Path) -> None:
    vetter = Vetter(VetContext.for_run(run_dir, "me/base", token=None))
    config = _checkpoint(run_dir) / "tokenizer_config.json"
    first = vetter.file(config, kinds.TOKENIZER_CONFIG)
    assert vetter.file(config, kinds.TOKENIZER_CONFIG) is first
    _rewrite_json(config, lambda c: c.update(note=HF_TOKEN))  # a new version: vetted again, and refused
    with pytest.raises(SecretInFileError):
        vetter.file(config, kinds.TOKENIZER_CONFIG)


def test_the_merged_repo_and_the_space_publish_what_was_vetted(
    run_dir: Path, tmp_path: Path, local_hub: LocalHub, hub_api: HfApi, new_repo_id: str
) -> None:
    planted = _model_path("/home/alice/models/qwen")(run_dir, tmp_path)
    report = push_run(_request(run_dir, new_repo_id, local_hub))
    assert [r.repo_type for r in report.repos] == ["model", "model", "space"]
    merged = _downloaded(f"{new_repo_id}-merged", local_hub, tmp_path)
    space = _downloaded(f"{new_repo_id}-demo", local_hub, tmp_path, "space")
    for files in (_downloaded(new_repo_id, local_hub, tmp_path), merged, space):
        _assert_nothing_survives(files, [*planted, str(run_dir), str(tmp_path)])
    # The run's tokenizer, as vetted (its path field rewritten), replaces the base's in the merged repo.
    assert (
        json.loads(merged["tokenizer_config.json"].read_text())["name_or_path"]
        == Manifest.load(run_dir).base_model
    )
    shard = merged["model.safetensors"].read_bytes()
    (length,) = struct.unpack("<Q", shard[:8])
    assert json.loads(shard[8 : 8 + length]).get("__metadata__", {}) in ({}, {"format": "pt"})


# --- a real TRL run, HF_TOKEN a short word ---------------------------------------------------------------


@pytest.fixture(scope="module")
def open_hub(tmp_path_factory: pytest.TempPathFactory, tiny_qwen3: TinyModel) -> Iterator[LocalHub]:
    """A local Hub with no token of its own, which accepts any token ("test"), holding the tiny base."""
    hub = LocalHub(tmp_path_factory.mktemp("open-hub"), token=None).start()
    try:
        publish_model(
            HfApi(endpoint=hub.endpoint, token="test"), Path(tiny_qwen3.local_dir), tiny_qwen3.repo_id
        )
        yield hub
    finally:
        hub.stop()


@pytest.mark.slow
def test_a_real_trl_run_pushes_with_a_short_token_and_publishes_no_local_path(
    trl_run_dir: Path, tiny_qwen3: TinyModel, open_hub: LocalHub, make_repo_id, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv(
        "HF_TOKEN", "test"
    )  # a word of every vocabulary; the real Qwen3 tokenizer is in the run
    checkpoint = next((trl_run_dir / "checkpoints").glob("checkpoint-*"))
    assert (checkpoint / "tokenizer.json").is_file()
    assert get_token() == "test"  # what the push finds, and looks for in every file it publishes
    repo_id = make_repo_id("trl")
    report = push_run(PushRequest(run_dir=trl_run_dir, repo_id=repo_id, endpoint=open_hub.endpoint))
    assert [r.repo_id for r in report.repos] == [
        repo_id,
        f"{repo_id}-merged",
        f"{repo_id}-demo",
        f"{repo_id}-samples",  # the completions TRL saved: what a random model wrote, vetted too
    ]
    local = [str(trl_run_dir), str(trl_run_dir.resolve()), str(tiny_qwen3.local_dir), str(Path.home()) + "/"]
    local.append(tempfile.gettempdir().rstrip("/") + "/")
    published = {
        repo: _downloaded(repo, open_hub, tmp_path, repo_type, token="test")
        for repo, repo_type in (
            (repo_id, "model"),
            (f"{repo_id}-merged", "model"),
            (f"{repo_id}-demo", "space"),
            (f"{repo_id}-samples", "dataset"),
        )
    }
    for files in published.values():
        _assert_nothing_survives(files, local)
        # Besides the vocabulary (Qwen's holds tokens like "/home"), nothing names a user's folder at all.
        for path_in_repo, path in files.items():
            if (
                path.name not in ("tokenizer.json", "vocab.json", "merges.txt")
                and path.suffix != ".safetensors"
            ):
                for text in _decoded(path):
                    assert not any(root in text for root in ("/home/", "/root/", "/Users/")), path_in_repo
    adapter_repo = published[repo_id]
    assert {"tokenizer.json", "tokenizer_config.json", "adapter_config.json", "README.md"} <= set(
        adapter_repo
    )
    assert not [p for p in adapter_repo if p.endswith((".pt", ".pth", ".bin")) or "trainer_state" in p]
    assert "test" in adapter_repo["tokenizer.json"].read_text()  # the short token in use blocked nothing
    # PEFT saved the local folder the base was loaded from: it is the Hub id now.
    config = json.loads(adapter_repo["adapter_config.json"].read_text())
    assert config["base_model_name_or_path"] == tiny_qwen3.repo_id


def test_the_dry_run_says_what_vetting_changes_and_what_is_left_out(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _model_path("/home/alice/models/qwen")(run_dir, tmp_path)
    _resave_weights(run_dir, {"format": "pt", "output_dir": "/root/runs/grpo-7"})
    _rewrite_json(_checkpoint(run_dir) / "adapter_config.json", lambda c: c.update(training_note="x"))
    (_checkpoint(run_dir) / "notes.txt").write_text("x")
    argv = [
        "push",
        "--run-dir",
        str(run_dir),
        "--repo-id",
        "me/run",
        "--dry-run",
        "--no-merged",
        "--no-space",
    ]
    assert run_cli([*argv, "--endpoint", "http://127.0.0.1:9"]) == 0
    out = capsys.readouterr().out
    changes = out.split("Changed on the way (written from what was read):\n", 1)[1].splitlines()
    step = f"checkpoints/global_step_{STEP}"
    assert (
        f"  {step}/adapter_config.json: dropped what PEFT's LoraConfig does not read: training_note"
        in changes
    )
    assert f"  {step}/adapter_model.safetensors: dropped safetensors metadata: output_dir" in changes
    assert any(
        line.startswith("  tokenizer_config.json: 1 field(s) naming the model by its path")
        for line in changes
    )
    left_out = out.split(f"Left out of checkpoint-{STEP} (never published):\n", 1)[1].splitlines()
    assert [line.split()[0] for line in left_out[:4]] == [
        "notes.txt",
        "optimizer.pt",
        "trainer_state.json",
        "training_args.bin",
    ]
    assert "/home/alice" not in out and "/root/runs" not in out  # what was dropped is named, never shown
