"""Each attack on what hubkit reads, run through the real command in a process of its own: it ends in one
line of error or a clean result within 30 s and 1 GB of memory (peak RSS of the command and its workers,
from the kernel), prints no control character, and writes nothing outside its output folder.

The finer cases of each reader are tested beside it (test_release_hostile, test_training_args_hostile,
test_tensorboard_hostile); these are the end-to-end bounds the readers exist for."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest
from helpers import Bounded, push_adapters, run_bounded, tfrecord

HELDOUT = Path(__file__).parents[1] / "data" / "gsm8k_heldout.jsonl"
SECONDS = 30.0
PEAK_BYTES = 1024**3
LOOPING_TEMPLATE = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
GROWING_TEMPLATE = "{% set x = 'a' * 100000000 %}{% for i in range(1000) %}{{ x }}{% endfor %}"
OSC_52 = "\x1b]52;c;aGFja2Vk\x07"  # a clipboard write, as a terminal reads it


def _assert_bounded(done: Bounded, workdir: Path, *, refused: str | None) -> None:
    print(f"{done.seconds:.1f} s, peak {done.peak_bytes / 2**20:.0f} MiB")  # shown with -s
    assert done.seconds < SECONDS, f"ran {done.seconds:.1f} s"
    assert done.peak_bytes < PEAK_BYTES, f"peak {done.peak_bytes / 2**20:.0f} MiB"
    printed = done.stdout + done.stderr
    assert "Traceback" not in printed, printed[-2000:]
    assert not any((ord(c) < 32 and c not in "\n\t") or c == "\x7f" for c in printed), repr(printed[-500:])
    if refused is None:
        assert done.returncode == 0, printed[-2000:]
    else:
        assert done.returncode == 1 and done.stderr.count("\n") == 1, printed[-2000:]
        assert refused in done.stderr, done.stderr
    assert [p.name for p in workdir.iterdir()] in ([], ["out"]), list(workdir.iterdir())


@pytest.fixture
def release(trl_run_dir: Path, local_hub, new_repo_id: str) -> str:
    """A release of the tiny TRL run's adapters, to plant hostile files in."""
    assert push_adapters(trl_run_dir, new_repo_id, local_hub.endpoint) == 0
    return new_repo_id


def _eval(repo_id: str, endpoint: str) -> list[str]:
    return [
        "-m",
        "hubkit",
        "eval",
        "--repo-id",
        repo_id,
        "--endpoint",
        endpoint,
        "--out",
        "out",
        "--n",
        "3",
        "--metric",
        "gsm8k_correctness",
        "--problems",
        str(HELDOUT),
    ]


@pytest.mark.parametrize(
    ("path", "body", "refused"),
    [
        ("chat_template.jinja", LOOPING_TEMPLATE.encode(), "did not render"),
        ("chat_template.jinja", GROWING_TEMPLATE.encode(), "cannot render the prompts"),
        ("hubkit.json", b" " * 150_000_000 + b"{}", "hubkit.json: 150.0 MB, more than the 1.0 MB allowed"),
        ("adapter_config.json", None, "every rank must be an integer from 1 to"),
    ],
    ids=["a looping chat template", "a growing chat template", "a 150 MB manifest", "a rank of 2^21"],
)
def test_a_hostile_release_is_refused_within_bounds(
    path: str, body: bytes | None, refused: str, release: str, local_hub, hub_api, tmp_path: Path
) -> None:
    if body is None:  # the rank: in every adapter's config
        paths = [p for p in hub_api.list_repo_files(release) if p.endswith("adapter_config.json")]
        for config_path in paths:
            config = json.loads(Path(hub_api.hf_hub_download(release, config_path)).read_text())
            hub_api.upload_file(
                path_or_fileobj=json.dumps({**config, "r": 2**21}).encode(),
                path_in_repo=config_path,
                repo_id=release,
            )
    else:
        hub_api.upload_file(path_or_fileobj=body, path_in_repo=path, repo_id=release)
    for argv in (_eval(release, local_hub.endpoint), _space(release, local_hub.endpoint)):
        workdir = tmp_path / argv[2]
        workdir.mkdir()
        _assert_bounded(run_bounded(argv, workdir), workdir, refused=refused)


def test_a_release_whose_run_id_writes_to_the_clipboard_is_printed_escaped(
    release: str, local_hub, hub_api, tmp_path: Path
) -> None:
    manifest = json.loads(Path(hub_api.hf_hub_download(release, "hubkit.json")).read_text())
    manifest["run_id"] = f"run{OSC_52}"
    hub_api.upload_file(
        path_or_fileobj=json.dumps(manifest).encode(), path_in_repo="hubkit.json", repo_id=release
    )
    workdir = tmp_path / "work"
    workdir.mkdir()
    argv = [
        *_eval(release, local_hub.endpoint),
        "--steps",
        "3",
        "--max-new-tokens",
        "2",
        "--dtype",
        "float32",
    ]
    done = run_bounded(argv, workdir)
    _assert_bounded(done, workdir, refused=None)
    assert "run\\x1b]52;c;aGFja2Vk\\x07" in done.stdout + done.stderr


def _zip_bomb(path: Path, inflated: int) -> None:
    """A torch-layout archive whose data.pkl inflates to `inflated` zero bytes (written in 16 MB pieces)."""
    piece = b"\0" * (16 << 20)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("archive/version", "3\n")
        with archive.open("archive/data.pkl", "w", force_zip64=True) as member:
            for _ in range(inflated // len(piece)):
                member.write(piece)


def _shared_references(path: Path) -> None:
    """A torch.save of six levels of 100 references to the level below: 10^12 values once expanded."""
    import torch

    nested: object = [0] * 100
    for _ in range(5):
        nested = [nested] * 100
    torch.save({"learning_rate": 5e-6, "notes": nested}, path)


def _slot_state(path: Path) -> None:
    """A torch.save archive whose pickle BUILDs a GRPOConfig with a slot state naming the reader's own
    attributes (a setattr on the stand-in, in pickle's own load_build)."""
    import torch

    torch.save({}, path)
    text = b"".join(
        b"X" + len(k).to_bytes(4, "little") + k.encode() + b"K\x05s" for k in ("_hubkit_args", "args")
    )
    data_pkl = b"\x80\x02ctrl.trainer.grpo_config\nGRPOConfig\n)\x81N}" + text + b"\x86b."
    with zipfile.ZipFile(path) as saved:
        members = [
            (info, data_pkl if info.filename.endswith("/data.pkl") else saved.read(info))
            for info in saved.infolist()
        ]
    with zipfile.ZipFile(path, "w") as archive:
        for info, data in members:
            archive.writestr(info, data)


@pytest.mark.parametrize(
    ("plant", "refused"),
    [
        (lambda p: _zip_bomb(p, 1536 << 20), "training_args.bin"),
        (_shared_references, "training_args.bin"),
        (_slot_state, None),
    ],
    ids=["a 1.5 GB zip bomb", "a pickle of shared references", "a slot state on the reader's attributes"],
)
def test_a_hostile_training_args_bin_is_refused_within_bounds(
    plant, refused: str | None, trl_run_dir: Path, tiny_qwen3, local_hub, new_repo_id: str, tmp_path: Path
) -> None:
    base = tiny_qwen3.repo_id
    # A run of someone's own script: TRL's output folder alone, its settings read from training_args.bin.
    run_dir = tmp_path / "run"
    shutil.copytree(trl_run_dir / "checkpoints", run_dir)
    for checkpoint in run_dir.iterdir():
        if checkpoint.is_dir():
            plant(checkpoint / "training_args.bin")
    workdir = tmp_path / "work"
    workdir.mkdir()
    argv = ["-m", "hubkit", "push", "--run-dir", str(run_dir), "--repo-id", new_repo_id, "--base-model", base]
    done = run_bounded([*argv, "--endpoint", local_hub.endpoint, "--dry-run"], workdir)
    _assert_bounded(done, workdir, refused=refused)


def test_hostile_tensorboard_files_are_read_within_bounds(tmp_path: Path) -> None:
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary

    run_dir = tmp_path / "run" / "tensorboard_log" / "project" / "experiment"
    run_dir.mkdir(parents=True)
    event = Event(step=1, summary=Summary(value=[Summary.Value(tag="train/reward", simple_value=0.5)]))
    (run_dir / "events.out.tfevents.1.a").write_bytes(tfrecord(event.SerializeToString()) * 2_000_000)
    (run_dir / "events.out.tfevents.2.b").write_bytes(tfrecord(b"", length=2**62))
    (run_dir / "events.out.tfevents.3.c").write_bytes(tfrecord(b"\x0a\xff\xff\xff\xff") * 1000)
    workdir = tmp_path / "work"
    workdir.mkdir()
    code = (
        "import sys; from pathlib import Path; from hubkit.runs.tensorboard import event_files, read_event_metrics;"
        "m = read_event_metrics(event_files(Path(sys.argv[1]))); print(m.names)"
    )
    done = run_bounded(["-c", code, str(tmp_path / "run")], workdir)
    _assert_bounded(done, workdir, refused=None)
    assert "reward" in done.stdout


def _hostile_base(hub_api, tiny_qwen3, repo_id: str, name: str, body: bytes) -> None:
    """A base model repo of the tiny Qwen3's config files with `name` replaced by `body` (no weights:
    the release is refused before any would load)."""
    hub_api.create_repo(repo_id)
    for file in ("config.json", "generation_config.json"):
        data = body if file == name else (Path(tiny_qwen3.local_dir) / file).read_bytes()
        hub_api.upload_file(path_or_fileobj=data, path_in_repo=file, repo_id=repo_id)


def _two_million_tokens() -> bytes:
    vocab = ",".join(f'"t{i}":{i}' for i in range(2_000_000))
    return (
        '{"version":"1.0","added_tokens":[],"model":{"type":"BPE","vocab":{' + vocab + '},"merges":[]}}'
    ).encode()


def _added_tokens(count: int, first: int) -> bytes:
    decoder = {str(first + i): {"content": f"<t{i}>", "special": True} for i in range(count)}
    return json.dumps({"added_tokens_decoder": decoder, "tokenizer_class": "Qwen2Tokenizer"}).encode()


HOSTILE_BASES = {
    "a vocabulary of 2^31": ("config.json", {"vocab_size": 2**31}, "config.json: vocab_size is 2147483648"),
    "remote code": ("config.json", {"auto_map": {"AutoModelForCausalLM": "m.M"}}, "config.json: auto_map"),
    "a generation config 100,000 deep": (
        "generation_config.json",
        b"[" * 100_000 + b"]" * 100_000,
        "generation_config.json: nested too deep",
    ),
}
HOSTILE_TOKENIZERS = {
    "a tokenizer config with remote code": (
        "tokenizer_config.json",
        json.dumps({"auto_map": {"AutoTokenizer": ["t.T", None]}}).encode(),
        "tokenizer_config.json: auto_map",
    ),
    "a tokenizer.json that is not JSON": ("tokenizer.json", b"{not json", "tokenizer.json: not JSON"),
    "37,000 added tokens": (
        "tokenizer_config.json",
        _added_tokens(37_000, 151_000),
        "added_tokens_decoder holds the id 151669, which is no token of the base model's 151669",
    ),
    "a 48 MB tokenizer.json of 2 M tokens": (
        "tokenizer.json",
        None,
        "model.vocab holds 2000000 tokens, more than the base model's 151669",
    ),
}


@pytest.mark.parametrize("name", [*HOSTILE_BASES, *HOSTILE_TOKENIZERS])
def test_a_release_whose_base_or_tokenizer_is_hostile_is_refused_within_bounds(
    name: str, release: str, tiny_qwen3, local_hub, hub_api, make_repo_id, tmp_path: Path
) -> None:
    if name in HOSTILE_BASES:
        path, change, refused = HOSTILE_BASES[name]
        config = json.loads((Path(tiny_qwen3.local_dir) / path).read_text())
        body = change if isinstance(change, bytes) else json.dumps({**config, **change}).encode()
        base = make_repo_id("base")
        _hostile_base(hub_api, tiny_qwen3, base, path, body)
        manifest = json.loads(Path(hub_api.hf_hub_download(release, "hubkit.json")).read_text())
        path, body = "hubkit.json", json.dumps({**manifest, "base_model": base}).encode()
    else:
        path, body, refused = HOSTILE_TOKENIZERS[name]
        body = _two_million_tokens() if body is None else body
    hub_api.upload_file(path_or_fileobj=body, path_in_repo=path, repo_id=release)
    for argv in (_eval(release, local_hub.endpoint), _space(release, local_hub.endpoint)):
        workdir = tmp_path / argv[2]
        workdir.mkdir()
        _assert_bounded(run_bounded(argv, workdir), workdir, refused=refused)


@pytest.mark.parametrize(
    ("records", "refused"),
    [
        # 58 MB of 5.3 M one-key records; 10,001 steps of 100 values each.
        (lambda: b'{"step":1}\n' * 5_300_000, "holds more than 1000000 lines"),
        (
            lambda: b"".join(
                b'{"step":%d,"data":{%s}}\n' % (i, b",".join(b'"m%d":1' % j for j in range(100)))
                for i in range(10_001)
            ),
            "holds more than 1000000 values",
        ),
    ],
    ids=["5.3 M records", "10,001 steps of 100 values"],
)
def test_a_release_with_millions_of_metrics_records_is_read_within_bounds(
    records, refused: str, release: str, local_hub, hub_api, tmp_path: Path
) -> None:
    hub_api.upload_file(path_or_fileobj=records(), path_in_repo="metrics.jsonl", repo_id=release)
    workdir = tmp_path / "work"
    workdir.mkdir()
    argv = [
        *_eval(release, local_hub.endpoint),
        "--steps",
        "3",
        "--max-new-tokens",
        "2",
        "--dtype",
        "float32",
    ]
    done = run_bounded(argv, workdir)
    _assert_bounded(done, workdir, refused=refused)


def _plant_in_adapter_configs(hub_api, release: str, change: dict) -> None:
    """`change` in every adapter config of the release: its root's and each step's."""
    paths = [p for p in hub_api.list_repo_files(release) if p.endswith("adapter_config.json")]
    for config_path in paths:
        config = json.loads(Path(hub_api.hf_hub_download(release, config_path)).read_text())
        body = json.dumps({**config, **change}).encode()
        hub_api.upload_file(path_or_fileobj=body, path_in_repo=config_path, repo_id=release)


HOSTILE_ADAPTERS = {
    "target modules the base has not": (
        {"target_modules": ["router_proj", "expert_proj"]},
        "target_modules names 'router_proj', 'expert_proj', none of which",
    ),
    "a layer replicated 20,000 times": ({"layer_replication": [[0, 2]] * 20_000}, "layer_replication"),
}


@pytest.mark.parametrize("name", HOSTILE_ADAPTERS)
def test_a_release_whose_adapters_the_base_cannot_load_is_refused_within_bounds(
    name: str, release: str, local_hub, hub_api, tmp_path: Path
) -> None:
    change, refused = HOSTILE_ADAPTERS[name]
    _plant_in_adapter_configs(hub_api, release, change)
    for argv in (_eval(release, local_hub.endpoint), _space(release, local_hub.endpoint)):
        workdir = tmp_path / argv[2]
        workdir.mkdir()
        _assert_bounded(run_bounded(argv, workdir), workdir, refused=refused)


def _space(repo_id: str, endpoint: str) -> list[str]:
    return ["-m", "hubkit", "space", "--repo-id", repo_id, "--endpoint", endpoint, "--port", "1"]


def test_hubkit_space_refuses_adapters_of_rank_2_21_within_bounds(
    release: str, local_hub, hub_api, tmp_path: Path
) -> None:
    _plant_in_adapter_configs(hub_api, release, {"r": 2**21})
    done = run_bounded(_space(release, local_hub.endpoint), tmp_path)
    _assert_bounded(done, tmp_path, refused="every rank must be an integer from 1 to 65536")
    assert "the root adapter" in done.stderr  # checked before any step's, before the app loads one


def test_a_release_with_huge_eval_samples_serves_without_reading_them(
    release: str, local_hub, hub_api
) -> None:
    import time

    from huggingface_hub import try_to_load_from_cache

    from hubkit.space.config import FALLBACK_EXAMPLES, MAX_EXAMPLE_SAMPLES_BYTES, space_config_from_hub

    line = json.dumps({"model": "base", "problem": "What is 1 + 1?", "reference": "2"}).encode() + b"\n"
    samples = line * (MAX_EXAMPLE_SAMPLES_BYTES // len(line) + 1)
    hub_api.upload_file(path_or_fileobj=b"{}", path_in_repo="eval/results.json", repo_id=release)
    hub_api.upload_file(path_or_fileobj=samples, path_in_repo="eval/samples.jsonl", repo_id=release)
    started = time.monotonic()
    config = space_config_from_hub(hub_api, release)
    assert time.monotonic() - started < SECONDS
    assert tuple((e.prompt, e.answer) for e in config.app.examples) == FALLBACK_EXAMPLES
    assert not isinstance(try_to_load_from_cache(release, "eval/samples.jsonl"), str)  # never downloaded
