"""Read a report page back without a browser (standard library ``html.parser``): its tables as
lists of rows of cell texts, its images, its links and its sections."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
from typing import Any


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[list[list[str]]] = []
        self.images: list[dict[str, str]] = []
        self.sources: list[str] = []  # every src / href
        self.sections: list[str] = []
        self.cards: list[str] = []  # the <h4> titles of cards, in order
        self._stack: list[list[list[str]]] = []
        self._cell: list[str] | None = None
        self._h4: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, Any]]) -> None:
        a = dict(attrs)
        for key in ("src", "href"):
            if a.get(key):
                self.sources.append(a[key])
        if tag == "table":
            self._stack.append([])
        elif tag == "tr" and self._stack:
            self._stack[-1].append([])
        elif tag in ("td", "th") and self._stack:
            self._cell = []
        elif tag == "img":
            self.images.append(a)
        elif tag == "section" and a.get("id"):
            self.sections.append(a["id"])
        elif tag == "h4":
            self._h4 = []
        elif tag == "br" and self._cell is not None:
            self._cell.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "table" and self._stack:
            self.tables.append(self._stack.pop())
        elif tag in ("td", "th") and self._cell is not None and self._stack and self._stack[-1]:
            self._stack[-1][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "h4" and self._h4 is not None:
            self.cards.append(" ".join("".join(self._h4).split()))
            self._h4 = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._h4 is not None:
            self._h4.append(data)


def read_page(path: Path | str) -> _Page:
    """The parsed page (``tables``, ``images``, ``sources``, ``sections``, ``cards``)."""
    p = _Page()
    p.feed(Path(path).read_text(encoding="utf-8"))
    p.text = Path(path).read_text(encoding="utf-8")  # type: ignore[attr-defined]
    return p


def table_with(page: _Page, *header: str) -> list[list[str]]:
    """The first table whose header row starts with ``header``."""
    for t in page.tables:
        if t and tuple(t[0][: len(header)]) == header:
            return t
    raise AssertionError(f"no table with header {header}; headers: {[t[0] for t in page.tables if t]}")
