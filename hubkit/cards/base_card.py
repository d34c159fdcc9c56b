"""The base model's licence, read from its own card on the Hub the push goes to (never assumed).

Qwen2.5-3B-Instruct is ``license: other`` / ``license_name: qwen-research``, Qwen3-4B ``apache-2.0``
(research: anchors.md §0.3): a card that copied a fixed licence would be wrong for one of them.
"""

from __future__ import annotations

import logging
from urllib.parse import quote

from hubkit.cards.inputs import BaseModelCard
from hubkit.hub.download import cached_repo_file, download_repo_file
from hubkit.hub.repo_types import HUB_ENDPOINT

logger = logging.getLogger(__name__)


def _absolute_link(link: str, base_model: str, revision: str | None, endpoint: str | None) -> str:
    """A ``license_link`` relative to the base repo (``LICENSE``) made absolute, so it still works from our card."""
    if link.startswith(("http://", "https://")):
        return link
    hub = (endpoint or HUB_ENDPOINT).rstrip("/")
    return (
        f"{hub}/{base_model}/blob/{quote(revision or 'main', safe='')}/{link.removeprefix('./').lstrip('/')}"
    )


def _where(base_model: str, revision: str | None) -> str:
    return base_model + (f" at revision {revision}" if revision else "")


def read_base_model_card(
    base_model: str,
    revision: str | None = None,
    *,
    endpoint: str | None = None,
    token: str | None = None,
    cached_only: bool = False,
) -> BaseModelCard:
    """The licence fields of `base_model`'s card (``README.md``) at the revision the run pinned, on the
    push's Hub (default ``HF_ENDPOINT``, else huggingface.co); the link made absolute.

    A base without a card or without a ``license`` gives a `BaseModelCard` without a licence and a
    warning (logged): the card then states no licence rather than guess one. `cached_only` reads the card
    from the client's cache only, opening no connection (a dry run); a card not there gives no licence and
    no warning.

    Raises:
        PublishError: the base model or revision is not on that Hub, or the Hub cannot be reached.
    """
    from huggingface_hub import ModelCard

    if cached_only:
        readme = cached_repo_file(base_model, "README.md", revision=revision)
        if readme is None:
            return BaseModelCard(repo_id=base_model)
    else:
        readme = download_repo_file(
            base_model, "README.md", revision=revision, endpoint=endpoint, token=token
        )
    if readme is None:
        logger.warning("%s has no model card: the card states no licence", _where(base_model, revision))
        return BaseModelCard(repo_id=base_model)
    data = ModelCard(readme.read_text(encoding="utf-8"), ignore_metadata_errors=True).data
    license_ = data.license if isinstance(data.license, str) and data.license else None
    if license_ is None:
        logger.warning(
            "%s states no licence in its card: the card states none either", _where(base_model, revision)
        )
        return BaseModelCard(repo_id=base_model)
    name = data.license_name if isinstance(data.license_name, str) and data.license_name else None
    link = data.license_link if isinstance(data.license_link, str) and data.license_link else None
    return BaseModelCard(
        repo_id=base_model,
        license=license_,
        license_name=name,
        license_link=_absolute_link(link, base_model, revision, endpoint) if link else None,
    )
