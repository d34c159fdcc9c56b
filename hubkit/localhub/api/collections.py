"""Handlers for collections: create, get, list, update, delete, and their items, in the Hub's JSON.

Who may do what, as on the Hub: anyone sees a public collection, only its namespace's members a private
one (to others it does not exist); writing needs a write token for the namespace. An item must name a repo
(or collection) the caller can see, and a collection shows others only the items they can see; a listing
by item answers nothing about an item the caller cannot see.
"""

from __future__ import annotations

import re

from hubkit.localhub.accounts.identity import Caller
from hubkit.localhub.api.repos import iso_time
from hubkit.localhub.http import errors
from hubkit.localhub.http.context import HubContext
from hubkit.localhub.http.messages import Request, Response, json_response
from hubkit.localhub.storage.collections import Collection, check_item, slug_id
from hubkit.localhub.storage.exceptions import CollectionNotFoundError
from hubkit.localhub.storage.repos import REPO_TYPES, RepoRef

LIST_ITEMS_SHOWN = 4  # the Hub's listing shows each collection's first items only
MAX_LISTED = 100
_PAPER = re.compile(r"^[0-9]{4}\.[0-9]{4,5}$")


def _visible_item(ctx: HubContext, caller: Caller, item_type: str, item_id: str) -> bool:
    if item_type in REPO_TYPES:
        namespace, slash, name = item_id.partition("/")
        return bool(slash) and ctx.visible(caller, RepoRef(item_type, namespace, name)) is not None
    if item_type == "collection":
        namespace, _, slug = item_id.partition("/")
        try:
            return _collection(ctx, caller, namespace, slug) is not None
        except errors.HubHTTPError:
            return False
    return bool(_PAPER.match(item_id))


def _listed_item(item: str) -> tuple[str, str]:
    """(type, id) of a listing's `item` filter ("models/alice/run-42")."""
    kind, _, item_id = item.partition("/")
    return kind.removesuffix("s"), item_id


def _collection(ctx: HubContext, caller: Caller, namespace: str, slug: str) -> Collection:
    """The collection a URL names, if the caller may see it."""
    try:
        collection = ctx.collections.get(namespace, slug_id(namespace, slug))
    except CollectionNotFoundError:
        collection = None
    if collection is None or (collection.private and not caller.owns(namespace)):
        raise errors.not_found(f"Collection not found: {namespace}/{slug}")
    return collection


def _writable(ctx: HubContext, req: Request, namespace: str, slug: str) -> Collection:
    collection = _collection(ctx, req.caller, namespace, slug)
    ctx.access.check_write(req.caller, namespace, "change a collection of")
    return collection


def _as_json(ctx: HubContext, caller: Caller, collection: Collection, shown: int | None = None) -> dict:
    items = [i for i in collection.items if _visible_item(ctx, caller, i.item_type, i.item_id)]
    owner_type = "org" if collection.namespace in caller.orgs else "user"
    return {
        "slug": collection.slug,
        "title": collection.title,
        "description": collection.description,
        "owner": {"name": collection.namespace, "_id": collection.namespace, "type": owner_type},
        "items": [
            {
                "_id": item.object_id,
                "id": item.item_id,
                "type": item.item_type,
                "position": position,
                **({"note": {"text": item.note, "html": ""}} if item.note is not None else {}),
            }
            for position, item in enumerate(items[:shown])
        ],
        "lastUpdated": iso_time(int(collection.updated)),
        "position": 0,
        "private": collection.private,
        "theme": collection.theme,
        "upvotes": 0,
        "isUpvotedByUser": False,
    }


def create_collection(ctx: HubContext, req: Request) -> Response:
    data = req.body.json()
    namespace = data.get("namespace") or req.caller.name
    if not isinstance(namespace, str):
        raise errors.bad_request("A collection needs a namespace.")
    ctx.access.check_write(req.caller, namespace, "create a collection under")
    created = ctx.collections.create(
        namespace, data.get("title"), data.get("description"), data.get("private")
    )
    return json_response(_as_json(ctx, req.caller, created))


def get_collection(ctx: HubContext, req: Request, namespace: str, slug: str) -> Response:
    return json_response(_as_json(ctx, req.caller, _collection(ctx, req.caller, namespace, slug)))


def list_collections(ctx: HubContext, req: Request) -> Response:
    owner, item = req.param("owner"), req.param("item")  # item: e.g. "models/me/run-42"
    try:
        limit = min(int(req.param("limit") or MAX_LISTED), MAX_LISTED)
    except ValueError:
        raise errors.bad_request("limit is a whole number.") from None
    if item is not None and not _visible_item(ctx, req.caller, *_listed_item(item)):
        return json_response([])  # as for a repo that does not exist: nothing tells it exists
    listed = []
    for collection in ctx.collections.list(owner):
        if collection.private and not req.caller.owns(collection.namespace):
            continue
        if item is not None and not any(f"{i.item_type}s/{i.item_id}" == item for i in collection.items):
            continue
        entry = _as_json(ctx, req.caller, collection, shown=LIST_ITEMS_SHOWN)
        del entry["position"]  # a listing's entries carry none: the client numbers them itself
        listed.append(entry)
        if len(listed) >= limit:
            break
    return json_response(listed)


def update_collection(ctx: HubContext, req: Request, namespace: str, slug: str) -> Response:
    collection = _writable(ctx, req, namespace, slug)
    data = req.body.json()
    changes = {key: data[key] for key in ("title", "description", "private", "theme") if key in data}
    updated = ctx.collections.update(namespace, collection.id, **changes)
    return json_response({"success": True, "data": _as_json(ctx, req.caller, updated)})


def delete_collection(ctx: HubContext, req: Request, namespace: str, slug: str) -> Response:
    collection = _writable(ctx, req, namespace, slug)
    ctx.collections.delete(namespace, collection.id)
    return json_response({})


def add_item(ctx: HubContext, req: Request, namespace: str, slug: str) -> Response:
    collection = _writable(ctx, req, namespace, slug)
    data = req.body.json()
    item = data.get("item") if isinstance(data.get("item"), dict) else {}
    item_id, item_type = check_item(item.get("id"), item.get("type"))
    if not _visible_item(ctx, req.caller, item_type, item_id):
        raise errors.not_found(f"{item_type} {item_id} not found")
    updated = ctx.collections.add_item(namespace, collection.id, item_id, item_type, data.get("note"))
    return json_response(_as_json(ctx, req.caller, updated))


def update_item(ctx: HubContext, req: Request, namespace: str, slug: str, item: str) -> Response:
    collection = _writable(ctx, req, namespace, slug)
    data = req.body.json()
    ctx.collections.update_item(
        namespace, collection.id, item, note=data.get("note"), position=data.get("position")
    )
    return json_response({"success": True})


def delete_item(ctx: HubContext, req: Request, namespace: str, slug: str, item: str) -> Response:
    collection = _writable(ctx, req, namespace, slug)
    ctx.collections.delete_item(namespace, collection.id, item)
    return json_response({"success": True})
