"""Small HTML builders shared by the report sections; every piece of text goes through `esc`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape


def esc(value: object) -> str:
    """Text (of anything) escaped for HTML content and attribute values."""
    return escape(str(value), quote=True)


def section(anchor: str, title: str, body: str, state: str = "") -> str:
    """A titled `<section>`; `state` (e.g. `not-run`) becomes a CSS class and a data attribute for tests."""
    klass = f' class="{esc(state)}"' if state else ""
    data = f' data-state="{esc(state)}"' if state else ""
    return f'<section id="{esc(anchor)}"{klass}{data}><h2>{esc(title)}</h2>{body}</section>'


def not_run(anchor: str, title: str, reason: str) -> str:
    """The section of a part of the pipeline that has nothing to show, saying why."""
    return section(anchor, title, f'<p class="muted">Not run: {esc(reason)}</p>', "not-run")


def unavailable(anchor: str, title: str, problem: str) -> str:
    """The section whose artifacts exist but could not be read: the report still renders."""
    return section(anchor, title, f'<p class="warning">Could not be shown: {esc(problem)}</p>', "unavailable")


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], css_class: str = "") -> str:
    """A table whose cells are already HTML (escape text cells with `esc`)."""
    klass = f' class="{esc(css_class)}"' if css_class else ""
    head = "".join(f"<th>{esc(header)}</th>" for header in headers)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table{klass}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def badge(text: str, kind: str) -> str:
    """A coloured label: kind is good, bad, neutral or info."""
    return f'<span class="badge {esc(kind)}">{esc(text)}</span>'


def facts(items: Iterable[tuple[str, str]], wide: bool = False) -> str:
    """A definition list of (term, HTML value) pairs; `wide` lays out several pairs per line."""
    klass = "facts wide" if wide else "facts"
    return f'<dl class="{klass}">' + "".join(f"<dt>{esc(term)}</dt><dd>{value}</dd>" for term, value in items) + "</dl>"
