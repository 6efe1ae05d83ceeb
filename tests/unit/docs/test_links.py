"""Every link between the README and the pages under docs/ leads somewhere: the file
exists and, when the link names a heading, the page has that heading.

A page that moves or a heading that is renamed breaks the links to it; this test says
which link of which page, instead of a reader finding out.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6} (.+)$", re.MULTILINE)


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to -."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(h) for h in _HEADING.findall(_FENCE.sub("", page.read_text()))}


def links(page: Path) -> list[str]:
    return _LINK.findall(_FENCE.sub("", page.read_text()))


def test_there_are_pages_and_links() -> None:
    assert (ROOT / "docs" / "install.md") in PAGES
    assert sum(len(links(p)) for p in PAGES) > 20


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_of_the_page_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        if re.match(r"^[a-z]+:", target):  # https:, mailto:: outside the repository
            continue
        path, _, anchor = target.partition("#")
        found = (page.parent / path).resolve() if path else page
        if not found.exists():
            broken.append(f"{target}: no such file")
        elif anchor and (found.is_dir() or anchor not in anchors(found)):
            broken.append(f"{target}: no heading #{anchor} in {found.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_slug_is_githubs() -> None:
    assert slug("The operator's permissions") == "the-operators-permissions"
    assert slug("The release check is not a `kopf.timer`") == "the-release-check-is-not-a-kopftimer"
    assert slug("Mutual TLS: only the API server may call the webhook") == (
        "mutual-tls-only-the-api-server-may-call-the-webhook"
    )
