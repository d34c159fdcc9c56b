"""Collections on the local Hub, through huggingface_hub itself: create, get, list, update, delete, and
their items with notes; who may see and change them; the Hub's bounds; a restart keeps them."""

from __future__ import annotations

import pytest
from helpers import refused_status, team_settings
from huggingface_hub import HfApi

from hubkit.localhub import LocalHub


@pytest.fixture(scope="module")
def team_hub(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("collections")
    with LocalHub(folder / "hub", settings=team_settings(folder)) as hub:
        alice = HfApi(endpoint=hub.endpoint, token="hf_alice_write")
        for repo_id, private in (("alice/run-a", False), ("alice/run-b", False), ("alice/hidden", True)):
            alice.create_repo(repo_id, private=private)
        alice.create_repo("alice/run-a-samples", repo_type="dataset")
        yield hub


def _api(hub: LocalHub, token: str | bool) -> HfApi:
    return HfApi(endpoint=hub.endpoint, token=token)


def test_a_collection_holds_repos_with_notes_in_order(team_hub):
    alice = _api(team_hub, "hf_alice_write")
    made = alice.create_collection("Length penalty sweep", description="λ = 0 … 1 on GSM8K")
    assert made.slug.startswith("alice/length-penalty-sweep-") and made.owner["name"] == "alice"
    alice.add_collection_item(made.slug, "alice/run-a", "model", note="λ=0: accuracy 0.61, 212 tokens")
    alice.add_collection_item(made.slug, "alice/run-a-samples", "dataset")
    alice.add_collection_item(made.slug, "alice/run-b", "model", note="λ=0.5")
    got = alice.get_collection(made.slug)
    assert [(i.item_id, i.item_type, i.note, i.position) for i in got.items] == [
        ("alice/run-a", "model", "λ=0: accuracy 0.61, 212 tokens", 0),
        ("alice/run-a-samples", "dataset", None, 1),
        ("alice/run-b", "model", "λ=0.5", 2),
    ]
    assert got.title == "Length penalty sweep" and got.description == "λ = 0 … 1 on GSM8K"

    run_b = got.items[2]
    alice.update_collection_item(made.slug, run_b.item_object_id, note="λ=0.5: 0.58, 140 tokens", position=0)
    alice.delete_collection_item(made.slug, got.items[1].item_object_id)
    got = alice.get_collection(made.slug)
    assert [(i.item_id, i.note) for i in got.items] == [
        ("alice/run-b", "λ=0.5: 0.58, 140 tokens"),
        ("alice/run-a", "λ=0: accuracy 0.61, 212 tokens"),
    ]
    # The same item twice is a conflict, which the client's exists_ok accepts.
    assert refused_status(lambda: alice.add_collection_item(made.slug, "alice/run-a", "model")) == 409
    alice.add_collection_item(made.slug, "alice/run-a", "model", exists_ok=True)
    assert len(alice.get_collection(made.slug).items) == 2
    # Creating it again by title finds it, with exists_ok.
    assert alice.create_collection("Length penalty sweep", exists_ok=True).slug == made.slug
    assert refused_status(lambda: alice.create_collection("Length penalty sweep")) == 409

    updated = alice.update_collection_metadata(made.slug, title="Length penalty sweep (GSM8K)", theme="green")
    assert updated.theme == "green" and updated.slug.startswith("alice/length-penalty-sweep-gsm8k-")
    assert (
        alice.get_collection(made.slug).title == "Length penalty sweep (GSM8K)"
    )  # the old slug still finds it
    assert [c.slug for c in alice.list_collections(owner="alice", item="models/alice/run-b")] == [
        updated.slug
    ]
    assert list(alice.list_collections(owner="alice", item="models/alice/nothing")) == []

    alice.delete_collection(made.slug)
    assert refused_status(lambda: alice.get_collection(made.slug)) == 404
    alice.delete_collection(made.slug, missing_ok=True)


def test_who_may_see_and_change_a_collection(team_hub):
    alice, bob = _api(team_hub, "hf_alice_write"), _api(team_hub, "hf_bob_write")
    reader, anonymous = _api(team_hub, "hf_alice_read"), _api(team_hub, False)
    public = alice.create_collection("Public picks")
    alice.add_collection_item(public.slug, "alice/run-a", "model")
    alice.add_collection_item(public.slug, "alice/hidden", "model", note="private to alice")
    private = alice.create_collection("Lab notes", namespace="lab", private=True)

    # Others see the public collection without the private repo; the private collection does not exist.
    assert [i.item_id for i in bob.get_collection(public.slug).items] == ["alice/run-a"]
    assert [i.item_id for i in anonymous.get_collection(public.slug).items] == ["alice/run-a"]
    assert len(alice.get_collection(public.slug).items) == 2
    assert refused_status(lambda: bob.get_collection(private.slug)) == 404
    assert private.slug not in [c.slug for c in bob.list_collections()]
    assert private.slug in [c.slug for c in alice.list_collections(owner="lab")]

    # Writing needs a write token for the namespace.
    assert refused_status(lambda: bob.add_collection_item(public.slug, "alice/run-b", "model")) == 403
    assert refused_status(lambda: bob.create_collection("Planted", namespace="alice")) == 403
    assert refused_status(lambda: reader.add_collection_item(public.slug, "alice/run-b", "model")) == 403
    assert refused_status(lambda: anonymous.delete_collection(public.slug)) in (401, 403)
    # An item is a repo the caller can see.
    assert (
        refused_status(
            lambda: bob.add_collection_item(bob.create_collection("Bob's").slug, "alice/hidden", "model")
        )
        == 404
    )
    assert refused_status(lambda: alice.add_collection_item(public.slug, "alice/never-made", "model")) == 404
    assert [i.item_id for i in alice.get_collection(public.slug).items] == ["alice/run-a", "alice/hidden"]


def test_a_listing_by_item_tells_nothing_of_a_repo_the_caller_cannot_see(team_hub):
    """Listing by item is a question about the item: for a private repo (or one made private since it was
    added) others get the answer a repo that does not exist gets, an empty list, as on huggingface.co."""
    alice, bob, anonymous = (
        _api(team_hub, "hf_alice_write"),
        _api(team_hub, "hf_bob_write"),
        _api(team_hub, False),
    )
    alice.create_repo("alice/made-private-later")
    picks = alice.create_collection("Mixed picks")
    for repo_id in ("alice/run-b", "alice/hidden", "alice/made-private-later"):
        alice.add_collection_item(picks.slug, repo_id, "model")
    later = "models/alice/made-private-later"
    assert [c.slug for c in bob.list_collections(item=later)] == [picks.slug]
    alice.update_repo_settings("alice/made-private-later", private=True)

    for item in ("models/alice/hidden", later):
        assert picks.slug in [c.slug for c in alice.list_collections(item=item)]
        assert list(bob.list_collections(item=item)) == []
        assert list(anonymous.list_collections(item=item)) == []
        assert list(bob.list_collections(item=item, owner="alice")) == []
    assert [c.slug for c in bob.list_collections(item="models/alice/run-b")] == [picks.slug]
    # The collection itself shows bob only what he may see, in a listing as when read whole.
    listed = {c.slug: c for c in bob.list_collections(owner="alice")}
    assert [i.item_id for i in listed[picks.slug].items] == ["alice/run-b"]
    assert [i.item_id for i in bob.get_collection(picks.slug).items] == ["alice/run-b"]
    assert [i.item_id for i in alice.get_collection(picks.slug).items] == [
        "alice/run-b",
        "alice/hidden",
        "alice/made-private-later",
    ]


def test_the_hubs_bounds_are_kept(team_hub):
    alice = _api(team_hub, "hf_alice_write")
    assert refused_status(lambda: alice.create_collection("Too long", description="x" * 151)) == 400
    bounded = alice.create_collection("Bounded", description="x" * 150)
    assert (
        refused_status(
            lambda: alice.add_collection_item(bounded.slug, "alice/run-a", "model", note="n" * 501)
        )
        == 400
    )
    alice.add_collection_item(bounded.slug, "alice/run-a", "model", note="n" * 500)
    assert refused_status(lambda: alice.add_collection_item(bounded.slug, "../etc/passwd", "model")) == 400
    assert refused_status(lambda: alice.add_collection_item(bounded.slug, "alice/run-a", "weights")) == 400
    assert refused_status(lambda: alice.create_collection("t" * 101)) == 400
    assert refused_status(lambda: alice.get_collection("alice/not-a-slug")) == 404


def test_collections_survive_a_restart(tmp_path):
    with LocalHub(tmp_path / "hub", settings=team_settings(tmp_path)) as hub:
        alice = _api(hub, "hf_alice_write")
        alice.create_repo("alice/kept")
        slug = alice.create_collection("Kept").slug
        alice.add_collection_item(slug, "alice/kept", "model", note="still here")
    (tmp_path / "hub" / "collections" / "alice" / ".tmp-left-by-a-killed-server").write_bytes(b"{")
    with LocalHub(tmp_path / "hub", settings=team_settings(tmp_path)) as hub:
        items = _api(hub, "hf_alice_write").get_collection(slug).items
        assert [(i.item_id, i.note) for i in items] == [("alice/kept", "still here")]
    assert not list((tmp_path / "hub" / "collections" / "alice").glob(".tmp-*"))
