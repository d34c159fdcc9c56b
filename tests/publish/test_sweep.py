"""A sweep's runs pushed one by one: their repos gather in one Hub Collection named for the sweep, each noted
with the run's varied value, final accuracy and mean answer length, in the order of the values; a run added
later takes its place; an unchanged push changes nothing. Through huggingface_hub against the local Hub.

The runs are synthetic (random adapters, hand-written evaluations): what is tested is the Collection."""

from __future__ import annotations

from pathlib import Path

import pytest
from eval_results import write_eval
from helpers import push_adapters, run_cli, write_requests

from hubkit.cards import BaseModelCard, CardInputs, adapter_card_files, text
from hubkit.cards.sweep_siblings import SIBLINGS_END, SIBLINGS_START, SiblingRepo, SweepSibling, with_siblings
from hubkit.publish import PushRequest, push_run
from hubkit.release.companions import SWEEP_PAGE
from hubkit.runs.eval_results import Sample, model_name
from hubkit.runs.manifest import Manifest, SweepInfo
from hubkit.runs.model import Metrics, Run
from tests.support.runs import TINY_SHAPES, make_run


def _sweep_run(root: Path, base: str, name: str, value: float | None, correct: int, tokens: int) -> Path:
    """A run of two steps evaluated on 4 problems with the base: the base answers 1 right in 100 tokens,
    step 1 one right, step 2 `correct` right, both in `tokens` tokens."""
    run_dir = make_run(root, (1, 2), base_model=base, shapes=TINY_SHAPES, run_id=f"lp-{value}")
    if value is not None:
        manifest = Manifest.load(run_dir)
        manifest.with_updates(sweep=SweepInfo(name, "length_penalty_weight", value)).save(run_dir)
    right = {None: 1, 1: 1, 2: correct}
    samples = [
        Sample(
            model_name(step),
            step,
            i,
            f"problem {i}",
            "4",
            f"answer {i} of {step}",
            i < right[step],
            100 if step is None else tokens,
            False,
        )
        for step in (None, 1, 2)
        for i in range(4)
    ]
    write_eval(run_dir, samples)
    return run_dir


ADAPTERS_ONLY = {"merged": False, "space": False}  # and the samples dataset: the eval's answers


def _push(run_dir: Path, repo_id: str, local_hub):
    hub = {"endpoint": local_hub.endpoint, "token": local_hub.token}
    return push_run(PushRequest(run_dir, repo_id=repo_id, **ADAPTERS_ONLY, **hub))


def _collection_writes(local_hub, since: int) -> list:
    return [
        r
        for r in local_hub.request_log[since:]
        if r[0] in ("POST", "PATCH", "DELETE") and "/collections" in r[1]
    ]


def _assert_page(hub_api, page: str, repos: dict, tmp_path: Path) -> None:
    """The comparison page: the table by value, the chart, every answer loadable with `datasets`."""
    from datasets import load_dataset

    card = Path(hub_api.hf_hub_download(page, "README.md", repo_type="dataset")).read_text()
    rows = [line for line in card.splitlines() if line.startswith(("| 0.0 |", "| 0.5 |", "| 1.0 |"))]
    assert [row.split(" | ")[0] for row in rows] == ["| 0.0", "| 0.5", "| 1.0"]
    assert "2: 75.0 % [30.1 %, 95.4 %]" in rows[0] and "| 120 / 120 / 120 |" in rows[0]
    assert "2: 50.0 % [15.0 %, 85.0 %]" in rows[2]
    chart = Path(hub_api.hf_hub_download(page, "assets/accuracy_vs_length.png", repo_type="dataset"))
    assert chart.read_bytes().startswith(b"\x89PNG") and "![accuracy against mean answer length]" in card
    # Every model's answer to problem 0: the base once, then each run's two checkpoints.
    assert card.count("answer 0 of None") == 1 and card.count("answer 0 of 2") == 3
    answers = load_dataset(page, "answers", split="train", cache_dir=str(tmp_path / "datasets"))
    assert len(answers) == 3 * 3 * 4 and set(answers["run"]) == {repos[v] for v in (0.0, 0.5, 1.0)}
    side_by_side = answers.filter(lambda r: r["problem_index"] == 2 and r["step"] == 2)
    assert sorted(zip(side_by_side["value"], side_by_side["correct"], strict=True)) == [
        ("0.0", True),
        ("0.5", True),
        ("1.0", False),
    ]


def _listed_siblings(hub_api, repo_id: str) -> list[str]:
    """The lines of the adapter card's list of the sweep's other runs."""
    card = Path(hub_api.hf_hub_download(repo_id, "README.md")).read_text()
    assert card.count(SIBLINGS_START) == 1 and card.count(SIBLINGS_END) == 1
    return card.split(SIBLINGS_START)[1].split(SIBLINGS_END)[0].strip().splitlines()


@pytest.fixture
def sweep_name(new_repo_id: str) -> str:
    return "sweep " + new_repo_id.split("/")[1][-30:]


def test_a_sweeps_runs_gather_in_one_collection_ordered_by_value(
    tmp_path, tiny_qwen3, local_hub, hub_api, make_repo_id, sweep_name
):
    runs = {
        value: _sweep_run(tmp_path / str(value), tiny_qwen3.repo_id, sweep_name, value, correct, tokens)
        for value, correct, tokens in ((1.0, 2, 40), (0.0, 3, 120), (0.5, 3, 70))
    }
    repos = {value: make_repo_id(f"lp{value}") for value in runs}
    dry = push_run(PushRequest(runs[0.0], repo_id=repos[0.0], dry_run=True, **ADAPTERS_ONLY))
    assert f"would join the Hub Collection {sweep_name!r} as length_penalty_weight=0.0" in "\n".join(
        dry.notes
    )
    assert not list(hub_api.list_collections(owner=repos[0.0].split("/")[0], item=f"models/{repos[0.0]}"))
    for value, run_dir in runs.items():
        report = _push(run_dir, repos[value], local_hub)
        assert any(sweep_name.lower().replace(" ", "-") in note for note in report.notes)

    owner = repos[0.0].split("/")[0]
    (found,) = [c for c in hub_api.list_collections(owner=owner) if c.title == sweep_name]
    collection = hub_api.get_collection(found.slug)
    page = SWEEP_PAGE.sweep_repo_id(owner, sweep_name)
    listed = [(i.item_id, i.item_type) for i in collection.items]
    assert listed == [(page, "dataset")] + [
        (repos[v] + suffix, kind)
        for v in (0.0, 0.5, 1.0)
        for suffix, kind in (("", "model"), ("-samples", "dataset"))
    ]
    notes = [i.note for i in collection.items[1:]]
    assert notes[0] == (
        "length_penalty_weight=0.0 · adapter: final accuracy 75.0% [30.1%, 95.4%] on 4 problems, "
        "mean answer 120 tokens (step 2)"
    )
    assert notes[1].startswith("length_penalty_weight=0.0 · samples: final accuracy 75.0%")
    assert (
        notes[4].startswith("length_penalty_weight=1.0 · adapter: final accuracy 50.0%")
        and "40 tokens" in notes[4]
    )
    _assert_page(hub_api, page, repos, tmp_path)
    # Each run's card places it in the sweep, with the page's chart and its siblings' repos: the first run
    # pushed learnt of the others from their pushes.
    card = Path(hub_api.hf_hub_download(repos[0.5], "README.md")).read_text()
    assert "## This run in its sweep" in card and "`length_penalty_weight=0.5` point" in card
    assert f"(https://huggingface.co/datasets/{page}/resolve/main/assets/accuracy_vs_length.png)" in card
    assert _listed_siblings(hub_api, repos[0.5]) == [
        f"- `length_penalty_weight=0.0`: {text.literal(notes[0].partition(': ')[2])} ([adapter](https://huggingface.co/"
        f"{repos[0.0]}) · [samples](https://huggingface.co/datasets/{repos[0.0]}-samples))",
        f"- `length_penalty_weight=1.0`: {text.literal(notes[4].partition(': ')[2])} ([adapter](https://huggingface.co/"
        f"{repos[1.0]}) · [samples](https://huggingface.co/datasets/{repos[1.0]}-samples))",
    ]
    assert [line.split("`")[1] for line in _listed_siblings(hub_api, repos[1.0])] == [
        "length_penalty_weight=0.0",
        "length_penalty_weight=0.5",
    ]
    assert Manifest.from_file(Path(hub_api.hf_hub_download(repos[0.5], "hubkit.json"))).sweep.value == 0.5

    # A fourth value, pushed later, takes its place between its neighbours; the others are untouched.
    runs[0.25] = _sweep_run(tmp_path / "0.25", tiny_qwen3.repo_id, sweep_name, 0.25, 4, 90)
    repos[0.25] = make_repo_id("lp0.25")
    commits = {v: len(hub_api.list_repo_commits(repos[v])) for v in repos if v != 0.25}
    _push(runs[0.25], repos[0.25], local_hub)
    # Every sibling's card now lists it too: one commit each, to the README.
    for value, count in commits.items():
        assert len(hub_api.list_repo_commits(repos[value])) == count + 1
        listed = [line.split("`")[1] for line in _listed_siblings(hub_api, repos[value])]
        assert listed == [f"length_penalty_weight={v}" for v in (0.0, 0.25, 0.5, 1.0) if v != value]
    assert f"[adapter](https://huggingface.co/{repos[0.25]})" in "".join(
        _listed_siblings(hub_api, repos[0.0])
    )
    assert len(_listed_siblings(hub_api, repos[0.25])) == 3
    items = hub_api.get_collection(found.slug).items
    assert [i.item_id for i in items if i.item_type == "model"] == [repos[v] for v in (0.0, 0.25, 0.5, 1.0)]
    assert (
        items[0].item_id == page
        and "| 0.25 |" in Path(hub_api.hf_hub_download(page, "README.md", repo_type="dataset")).read_text()
    )
    assert [i.note for i in items if i.item_id in (repos[0.0], repos[1.0])] == [notes[0], notes[4]]

    # Pushing the unchanged sweep again changes nothing: no commit, no call that writes the Collection.
    heads = {v: hub_api.repo_info(repos[v]).sha for v in runs}
    since = len(local_hub.request_log)
    for value, run_dir in runs.items():
        report = _push(run_dir, repos[value], local_hub)
        assert all(r.unchanged for r in report.repos) and not [n for n in report.notes if "collection" in n]
    assert _collection_writes(local_hub, since) == [] and write_requests(local_hub.request_log, since) == []
    assert heads == {v: hub_api.repo_info(repos[v]).sha for v in runs}


def test_a_sweep_pushed_before_any_evaluation_has_its_page_already(
    tmp_path, tiny_qwen3, local_hub, hub_api, make_repo_id, sweep_name
):
    """Runs pushed while they train link the comparison page from their first push: it says no run is
    evaluated yet, and compares them once one is."""
    from hubkit.publish.sweep.collection import PAGE_NOTE

    run_dir = make_run(tmp_path / "training", (1,), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    Manifest.load(run_dir).with_updates(sweep=SweepInfo(sweep_name, "length_penalty_weight", 0.5)).save(
        run_dir
    )
    repo = make_repo_id("lp0.5")
    _push(run_dir, repo, local_hub)
    page = SWEEP_PAGE.sweep_repo_id(repo.split("/")[0], sweep_name)
    (found,) = [c for c in hub_api.list_collections(owner=repo.split("/")[0]) if c.title == sweep_name]
    first = hub_api.get_collection(found.slug).items[0]
    assert (first.item_id, first.note) == (page, PAGE_NOTE)
    card = Path(hub_api.hf_hub_download(page, "README.md", repo_type="dataset")).read_text()
    assert f"No run of the sweep is evaluated yet: `hubkit eval --sweep '{sweep_name}'`" in card
    chart = Path(hub_api.hf_hub_download(page, "assets/accuracy_vs_length.png", repo_type="dataset"))
    assert chart.read_bytes().startswith(b"\x89PNG")
    assert (
        f"(https://huggingface.co/datasets/{page})"
        in Path(hub_api.hf_hub_download(repo, "README.md")).read_text()
    )

    _push(_sweep_run(tmp_path / "evaluated", tiny_qwen3.repo_id, sweep_name, 0.5, 3, 70), repo, local_hub)
    card = Path(hub_api.hf_hub_download(page, "README.md", repo_type="dataset")).read_text()
    assert "No run of the sweep is evaluated yet" not in card and "| 0.5 |" in card


def test_a_push_without_the_merged_model_still_brings_its_note_up_to_date(
    tmp_path, tiny_qwen3, hub_api, make_repo_id, sweep_name
):
    """`--no-merged` after an evaluation: the merged repo (pushed before, while training) keeps its place in
    the Collection and gets the run's new note; a repo of the release never pushed is not added."""
    from hubkit.publish.sweep.collection import SweepItem, join_sweep
    from hubkit.runs.eval_results import load_eval

    sweep = SweepInfo(sweep_name, "length_penalty_weight", 0.5)
    adapter = make_repo_id("lp")
    for repo_id in (adapter, adapter + "-merged"):
        hub_api.create_repo(repo_id)
    items = [SweepItem(adapter, "model", "adapter"), SweepItem(adapter + "-merged", "model", "merged")]
    _, collection = join_sweep(hub_api, sweep, items, None, endpoint=hub_api.endpoint)
    assert [i.note for i in collection.items] == [
        "length_penalty_weight=0.5 · adapter: not evaluated",
        "length_penalty_weight=0.5 · merged: not evaluated",
    ]
    evaluation = load_eval(_sweep_run(tmp_path, tiny_qwen3.repo_id, sweep_name, 0.5, 3, 70)).summary
    held = [items[1], SweepItem(adapter + "-GGUF", "model", "GGUF")]
    changes, collection = join_sweep(
        hub_api, sweep, items[:1], evaluation, endpoint=hub_api.endpoint, held=held
    )
    assert len(changes) == 2 and [i.item_id for i in collection.items] == [adapter, adapter + "-merged"]
    assert [i.note.partition(": ")[2] for i in collection.items] == [
        "final accuracy 75.0% [30.1%, 95.4%] on 4 problems, mean answer 70 tokens (step 2)"
    ] * 2


def test_a_run_of_ones_own_script_joins_a_sweep_by_flag(
    tmp_path, tiny_qwen3, local_hub, hub_api, new_repo_id, sweep_name
):
    run_dir = _sweep_run(tmp_path, tiny_qwen3.repo_id, sweep_name, None, 1, 10)
    no_value = push_adapters(run_dir, new_repo_id, local_hub.endpoint, "--sweep", sweep_name)
    assert no_value == 2  # a usage error: the run records no sweep, and no --sweep-value was given
    assert not hub_api.repo_exists(new_repo_id)
    args = ("--sweep", sweep_name, "--sweep-value", "learning_rate=5e-6")
    assert push_adapters(run_dir, new_repo_id, local_hub.endpoint, *args) == 0
    (found,) = [c for c in hub_api.list_collections(owner=new_repo_id.split("/")[0]) if c.title == sweep_name]
    page, adapter, samples = hub_api.get_collection(found.slug).items
    assert (adapter.item_id, samples.item_id) == (new_repo_id, new_repo_id + "-samples")
    assert page.item_id == SWEEP_PAGE.sweep_repo_id(new_repo_id.split("/")[0], sweep_name)
    # The flag's sweep is published in the run's manifest, as a recipe would have recorded it.
    published = Manifest.from_file(Path(hub_api.hf_hub_download(new_repo_id, "hubkit.json")))
    assert (published.sweep.setting, published.sweep.value) == ("learning_rate", 5e-6)
    assert adapter.note.startswith("learning_rate=5e-06 · adapter: final accuracy 25.0%")


def test_every_run_of_a_sweep_is_pushed_by_one_command(
    tmp_path, tiny_qwen3, local_hub, hub_api, make_repo_id, sweep_name, capsys
):
    runs, repos = tmp_path / "runs", {}
    for value in (0.5, 0.0):
        run_dir = _sweep_run(runs, tiny_qwen3.repo_id, sweep_name, value, 2, 50)
        repos[value] = make_repo_id(f"lp{value}")
        Manifest.load(run_dir).with_updates(push_to=repos[value]).save(run_dir)  # as the recipes' --push-to
    other = _sweep_run(runs, tiny_qwen3.repo_id, "another sweep", 1.0, 2, 50)
    argv = ["push", "--sweep", sweep_name, "--runs-dir", str(runs), "--endpoint", local_hub.endpoint]
    argv += ["--no-merged", "--no-space", "--no-samples"]
    assert run_cli([*argv, "--repo-id", repos[0.0]]) == 2
    assert "drop the --*repo-id options" in capsys.readouterr().err
    assert run_cli([*argv, "--sweep-value", "length_penalty_weight=2"]) == 2
    assert not hub_api.repo_exists(repos[0.0])

    assert run_cli([*argv, "-q"]) == 0
    (found,) = [c for c in hub_api.list_collections(owner=repos[0.0].split("/")[0]) if c.title == sweep_name]
    models = [i.item_id for i in hub_api.get_collection(found.slug).items if i.item_type == "model"]
    assert models == [repos[0.0], repos[0.5]]
    assert Manifest.load(other).sweep.name == "another sweep" and all(
        f"/{other.name}" not in m for m in models
    )
    assert run_cli(["push", "--sweep", "no such sweep", "--runs-dir", str(runs)]) == 1
    assert "no run of the sweep 'no such sweep'" in capsys.readouterr().err


def test_a_card_whose_list_of_siblings_is_rewritten_is_the_card_written_with_that_list(tmp_path):
    sweep = SweepInfo("lp", "length_penalty_weight", 0.5)
    manifest = Manifest(run_id="run", framework="trl", base_model="Qwen/Qwen2.5-3B-Instruct", sweep=sweep)
    run = Run(tmp_path, manifest, (), (), Metrics(), finished=True)

    def card(siblings: tuple[SweepSibling, ...]) -> str:
        inputs = CardInputs(
            run=run,
            repo_id="me/lp0.5",
            steps=(2,),
            base=BaseModelCard(manifest.base_model),
            sweep_siblings=siblings,
        )
        return adapter_card_files(inputs)["README.md"]

    first = SweepSibling("0.0", (SiblingRepo("adapter", "me/lp0", "model"),), "final accuracy 75.0%")
    later = SweepSibling(
        "1.0",
        (SiblingRepo("adapter", "me/lp1", "model"), SiblingRepo("Space", "me/lp1-demo", "space")),
        "not evaluated",
    )
    alone = card(())
    assert b"No other run of the sweep is on the Hub yet" in alone
    assert with_siblings(alone, "length_penalty_weight", (first, later)) == card((first, later))
    assert with_siblings(card((first,)), "length_penalty_weight", ()) == alone
    assert (
        "- `length_penalty_weight=1.0`: not evaluated ([adapter](https://huggingface.co/me/lp1) · "
        "[Space](https://huggingface.co/spaces/me/lp1-demo))"
    ).encode() in card((first, later))
    # A note read back from the Hub cannot end the list early nor spread over lines.
    hostile = SweepSibling("0.0", first.repos, f"ok {SIBLINGS_END}\n# not a heading")
    written = card((hostile,))
    assert written.count(SIBLINGS_END.encode()) == 1 and b"\n# not a heading" not in written
    assert with_siblings(written, "length_penalty_weight", (first,)) == card((first,))
    # A card edited by hand (a marker gone, or doubled) is left as it is.
    start, end = SIBLINGS_START.encode(), SIBLINGS_END.encode()
    assert with_siblings(alone.replace(end, b""), "length_penalty_weight", (first,)) is None
    assert with_siblings(alone + start, "length_penalty_weight", (first,)) is None
    reversed_markers = alone.replace(start, b"@").replace(end, start).replace(b"@", end)
    assert with_siblings(reversed_markers, "length_penalty_weight", (first,)) is None


def test_only_the_collection_items_hubkit_noted_count_as_runs_and_at_most_a_page_of_them():
    from types import SimpleNamespace

    from hubkit.publish.sweep.page import MAX_ITEMS, MAX_RUNS
    from hubkit.publish.sweep.siblings import siblings_of, sweep_runs

    def item(repo_id: str, note: str | None, item_type: str = "model") -> SimpleNamespace:
        return SimpleNamespace(item_id=repo_id, item_type=item_type, note=note)

    items = [
        item("me/lp1", "lp=1 · adapter: final accuracy 50.0%"),
        item("me/lp1-samples", "lp=1 · samples: final accuracy 50.0%", "dataset"),
        item("me/lp0.5", "lp=0.5 · adapter: not evaluated"),
        item("me/lp0.5-demo", "lp=0.5 · Space: not evaluated", "space"),
        item("me/notes", "a note of someone's own"),
        item("me/none", None),
        item("../../etc", "lp=2 · adapter: a repo id no Hub gives"),
        item("me/paper", "lp=3 · paper: not a kind of a release"),
        item("me/odd", "lp=4 · adapter: an item type no Collection holds", "collection"),
        item("you/lp5", "lp=5 · adapter: another owner's repo, not a run of this sweep"),
    ]
    runs = sweep_runs(SimpleNamespace(slug="me/lp-0123", items=items))
    assert [(r.value, [x.repo_id for x in r.repos], r.result) for r in runs] == [
        ("0.5", ["me/lp0.5", "me/lp0.5-demo"], "not evaluated"),
        ("1", ["me/lp1", "me/lp1-samples"], "final accuracy 50.0%"),
    ]
    assert [r.value for r in siblings_of("1", runs)] == ["0.5"]
    many = [item(f"me/lp{i}", f"lp={i} · adapter: not evaluated") for i in range(MAX_RUNS + 5)]
    assert len(sweep_runs(SimpleNamespace(slug="me/lp-0123", items=many))) == MAX_RUNS
    # No item after a full sweep's worth is looked at, however many the Collection holds.
    late = [item(f"me/x{i}", None) for i in range(MAX_ITEMS)] + many
    assert sweep_runs(SimpleNamespace(slug="me/lp-0123", items=late)) == []
    assert sweep_runs(None) == []
