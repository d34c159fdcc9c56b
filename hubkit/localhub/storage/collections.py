"""Collections: named, ordered lists of repos with a note each, as the Hub keeps them, stored under
`root/collections/{namespace}/{id}.json` (one file per collection, replaced whole on each change).

Storage and its rules only; `api/collections.py` answers the Hub's routes. A collection is found by its
namespace and id (the 24 hex digits that end its slug), so a slug made before a title changed still finds
it, as on the Hub. Every bound the Hub documents is kept (a description of at most 150 characters, a note
of at most 500), and the rest are bounded too: a title, the items of one collection, the collections of
one namespace.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from hubkit.localhub.git.store import atomic_write
from hubkit.localhub.storage.exceptions import (
    CollectionConflictError,
    CollectionNotFoundError,
    InvalidInputError,
)
from hubkit.localhub.storage.names import check_name
from hubkit.localhub.storage.repos import REPO_TYPES

MAX_TITLE = 100
MAX_DESCRIPTION = 150
MAX_NOTE = 500
MAX_ITEMS = 1000
MAX_PER_NAMESPACE = 1000
ITEM_TYPES = (*REPO_TYPES, "collection", "paper")
THEMES = ("orange", "blue", "green", "purple", "pink", "indigo")
_ID = re.compile(r"^[0-9a-f]{24}$")
_SLUG_TAIL = re.compile(r"-([0-9a-f]{24})$")
_ITEM_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-/]{0,200}$")


@dataclass(frozen=True, kw_only=True)
class CollectionItem:
    object_id: str  # the item's own id in the collection (`_id` on the Hub)
    item_id: str  # the repo id (or paper id, collection slug)
    item_type: str
    note: str | None = None


@dataclass(frozen=True, kw_only=True)  # built from its stored JSON by name
class Collection:
    namespace: str
    id: str
    title: str
    description: str | None = None
    private: bool = False
    theme: str = "blue"
    updated: float = 0.0
    items: tuple[CollectionItem, ...] = field(default_factory=tuple)

    @property
    def slug(self) -> str:
        words = re.sub(r"[^a-z0-9]+", "-", self.title.lower()).strip("-")[:60] or "collection"
        return f"{self.namespace}/{words}-{self.id}"

    def item(self, object_id: str) -> CollectionItem:
        for item in self.items:
            if item.object_id == object_id:
                return item
        raise CollectionNotFoundError(f"No item {object_id!r} in collection {self.slug}.")


def check_title(title: object) -> str:
    if not isinstance(title, str) or not title.strip() or len(title) > MAX_TITLE:
        raise InvalidInputError(f"A collection's title is 1 to {MAX_TITLE} characters.")
    return title


def check_description(description: object) -> str | None:
    if description is not None and (not isinstance(description, str) or len(description) > MAX_DESCRIPTION):
        raise InvalidInputError(
            f"A collection's description is text of at most {MAX_DESCRIPTION} characters."
        )
    return description


def check_note(note: object) -> str | None:
    if note is not None and (not isinstance(note, str) or len(note) > MAX_NOTE):
        raise InvalidInputError(f"An item's note is text of at most {MAX_NOTE} characters.")
    return note


def check_item(item_id: object, item_type: object) -> tuple[str, str]:
    if item_type not in ITEM_TYPES:
        raise InvalidInputError(f"An item's type is one of {', '.join(ITEM_TYPES)}.")
    if not isinstance(item_id, str) or not _ITEM_ID.match(item_id) or ".." in item_id:
        raise InvalidInputError("An item's id is a repo id, a paper id or a collection slug.")
    return item_id, str(item_type)


def slug_id(namespace: str, slug: str) -> str:
    """The id a slug (``title-words-<24 hex>``, after its namespace) ends with."""
    match = _SLUG_TAIL.search(slug)
    if match is None:
        raise CollectionNotFoundError(f"No collection {namespace}/{slug}.")
    return match.group(1)


class CollectionStore:
    """The collections of one storage root; one lock orders every change."""

    def __init__(self, root: Path) -> None:
        self.root = root / "collections"
        self._lock = threading.Lock()

    def remove_leftovers(self) -> None:
        """Temporary files of a write a killed server did not finish (the collection kept its old file)."""
        for leftover in self.root.glob("*/.tmp-*"):
            leftover.unlink(missing_ok=True)

    def _path(self, namespace: str, collection_id: str) -> Path:
        check_name(namespace, "namespace")
        if not _ID.match(collection_id):
            raise CollectionNotFoundError(f"No collection {collection_id!r} in {namespace}.")
        return self.root / namespace / f"{collection_id}.json"

    def get(self, namespace: str, collection_id: str) -> Collection:
        """Raises CollectionNotFoundError."""
        path = self._path(namespace, collection_id)
        try:
            data = json.loads(path.read_bytes())
        except FileNotFoundError:
            raise CollectionNotFoundError(f"No collection {collection_id} in {namespace}.") from None
        items = tuple(CollectionItem(**item) for item in data.pop("items"))
        return Collection(**data, items=items)

    def list(self, namespace: str | None = None) -> list[Collection]:
        """Every collection (of `namespace`), the most recently updated first."""
        pattern = f"{check_name(namespace, 'namespace')}/*.json" if namespace else "*/*.json"
        found = [self.get(path.parent.name, path.stem) for path in self.root.glob(pattern)]
        return sorted(found, key=lambda c: c.updated, reverse=True)

    def _save(self, collection: Collection) -> Collection:
        collection = replace(collection, updated=time.time())
        data = asdict(collection)
        atomic_write(self._path(collection.namespace, collection.id), json.dumps(data).encode())
        return collection

    def create(self, namespace: str, title: str, description: str | None, private: bool) -> Collection:
        """Raises CollectionConflictError (the namespace has a collection of that title) and InvalidInputError."""
        title, description = check_title(title), check_description(description)
        with self._lock:
            existing = self.list(namespace)
            for collection in existing:
                if collection.title == title:
                    raise CollectionConflictError(f"{namespace} has a collection {title!r}", collection.slug)
            if len(existing) >= MAX_PER_NAMESPACE:
                raise InvalidInputError(f"{namespace} has {MAX_PER_NAMESPACE} collections, the most it may.")
            collection = Collection(
                namespace=namespace,
                id=secrets.token_hex(12),
                title=title,
                description=description,
                private=bool(private),
            )
            return self._save(collection)

    def update(self, namespace: str, collection_id: str, **changes: object) -> Collection:
        """Change title, description, private or theme (each checked)."""
        with self._lock:
            collection = self.get(namespace, collection_id)
            if "title" in changes:
                changes["title"] = check_title(changes["title"])
            if "description" in changes:
                changes["description"] = check_description(changes["description"])
            if "theme" in changes and changes["theme"] not in THEMES:
                raise InvalidInputError(f"A collection's theme is one of {', '.join(THEMES)}.")
            if "private" in changes:
                changes["private"] = bool(changes["private"])
            return self._save(replace(collection, **changes))  # type: ignore[arg-type]

    def delete(self, namespace: str, collection_id: str) -> None:
        with self._lock:
            path = self._path(namespace, collection_id)
            if not path.is_file():
                raise CollectionNotFoundError(f"No collection {collection_id} in {namespace}.")
            path.unlink()

    def add_item(
        self, namespace: str, collection_id: str, item_id: str, item_type: str, note: str | None
    ) -> Collection:
        """Append an item. Raises CollectionConflictError (already there) and InvalidInputError."""
        item_id, item_type = check_item(item_id, item_type)
        note = check_note(note)
        with self._lock:
            collection = self.get(namespace, collection_id)
            if any(i.item_id == item_id and i.item_type == item_type for i in collection.items):
                raise CollectionConflictError(f"{item_type} {item_id} is in the collection already.")
            if len(collection.items) >= MAX_ITEMS:
                raise InvalidInputError(f"A collection holds at most {MAX_ITEMS} items.")
            item = CollectionItem(
                object_id=secrets.token_hex(12), item_id=item_id, item_type=item_type, note=note
            )
            return self._save(replace(collection, items=(*collection.items, item)))

    def update_item(
        self,
        namespace: str,
        collection_id: str,
        object_id: str,
        *,
        note: object = None,
        position: object = None,
    ) -> Collection:
        """Change an item's note, or move it to `position` (the others keep their order)."""
        with self._lock:
            collection = self.get(namespace, collection_id)
            item = collection.item(object_id)
            items = [i for i in collection.items if i.object_id != object_id]
            if note is not None:
                item = replace(item, note=check_note(note))
            where = collection.items.index(collection.item(object_id))
            if position is not None:
                if not isinstance(position, int) or isinstance(position, bool) or position < 0:
                    raise InvalidInputError("An item's position is a whole number from 0.")
                where = min(position, len(items))
            items.insert(where, item)
            return self._save(replace(collection, items=tuple(items)))

    def delete_item(self, namespace: str, collection_id: str, object_id: str) -> Collection:
        with self._lock:
            collection = self.get(namespace, collection_id)
            collection.item(object_id)
            items = tuple(i for i in collection.items if i.object_id != object_id)
            return self._save(replace(collection, items=items))
