"""The report as one HTML page, ``report.html`` beside ``report.md``: the same text turned into HTML by
markdown-it-py (CommonMark with pipe tables), each figure inlined as its SVG (its PNG where it has none) in
a ``data:`` URI, so that the page is one file that opens from disk, attached to a mail or served, with
nothing beside it. Raw HTML in the Markdown shows as its text, escaped.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from html import escape
from pathlib import Path
from urllib.parse import unquote

from markdown_it import MarkdownIt

_TYPES = {".svg": "image/svg+xml", ".png": "image/png"}
STYLE = """
body { font: 15px/1.5 system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; }
h1, h2, h3, h4 { line-height: 1.25; }
.scroll { overflow-x: auto; margin: 1em 0; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
img { max-width: 100%; height: auto; }
code { font-size: 90%; background: #f3f3f3; padding: 0 2px; }
"""


def _parser() -> MarkdownIt:
    parser = MarkdownIt("commonmark", {"html": False}).enable("table")
    # A wide table scrolls inside its box rather than widening the page.
    parser.add_render_rule("table_open", lambda *_: '<div class="scroll"><table>\n')
    parser.add_render_rule("table_close", lambda *_: "</table></div>\n")
    return parser


def to_html(markdown: str, image: Callable[[str], str]) -> str:
    """The body of the page: ``markdown`` as HTML; ``image`` gives the ``src`` of an image's Markdown
    path (markdown-it percent-encodes it; ``image`` gets the path as written)."""
    parser = _parser()
    tokens = parser.parse(markdown)
    for token in tokens:
        for child in token.children or ():
            if child.type == "image":
                child.attrSet("src", image(unquote(str(child.attrGet("src")))))
    return parser.renderer.render(tokens, parser.options, {})


def data_uri(path: Path) -> str | None:
    """The figure at ``path`` as a ``data:`` URI: its SVG where one lies beside it, else the file; None
    when neither is there."""
    vector = path.with_suffix(".svg")
    chosen = vector if vector.is_file() else path
    if not chosen.is_file():
        return None
    kind = _TYPES.get(chosen.suffix, "application/octet-stream")
    return f"data:{kind};base64,{base64.b64encode(chosen.read_bytes()).decode('ascii')}"


def write_page(markdown: str, path: Path, title: str) -> Path:
    """``markdown`` (the report's text, its images relative to ``path``'s folder) as one HTML page; an
    image whose file is not there keeps its relative path, which a browser shows as missing."""
    path = Path(path)
    body = to_html(markdown, lambda src: data_uri(path.parent / src) or src)
    path.write_text(
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{escape(title)}</title>\n'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">\n<style>{STYLE}</style>\n'
        f"</head>\n<body>\n{body}\n</body>\n</html>\n"
    )
    return path
