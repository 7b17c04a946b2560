"""The report as one HTML page, ``report.html`` beside ``report.md``: the same text turned into HTML, each
figure inlined as its SVG (its PNG where it has none) in a ``data:`` URI, so that the page is one file
that opens from disk, attached to a mail or served, with nothing beside it.

It reads the Markdown the report writes and no more: ``#`` headings, paragraphs, ``- `` lists, pipe tables
(``\\|`` inside a cell), an image alone on its line, inline code, bold and italics. Anything else shows as
its text, escaped.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from html import escape
from pathlib import Path

_HEADING = re.compile(r"(#{1,6}) (.*)")
# Greedy up to the last "](": a caption may hold brackets ("[digits]"), a figure's file name none.
_IMAGE = re.compile(r"!\[(.*)\]\(([^()\s]+)\)")
_SEPARATOR = re.compile(r"\|(\s*:?-{3,}:?\s*\|)+")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")
_INLINE = re.compile(r"`([^`]+)`|\*\*(.+?)\*\*|(?<![\w*])\*(?![\s*])(.+?)(?<![\s*])\*(?![\w*])")
_TYPES = {".svg": "image/svg+xml", ".png": "image/png"}
STYLE = """
body { font: 15px/1.5 system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; }
h1, h2, h3, h4 { line-height: 1.25; }
.scroll { overflow-x: auto; margin: 1em 0; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
figure { margin: 1.5em 0 0.3em; }
figure img { max-width: 100%; height: auto; }
code { font-size: 90%; background: #f3f3f3; padding: 0 2px; }
"""


def inline(text: str) -> str:
    """One line of Markdown text as HTML: code spans, bold and italics; the rest escaped."""
    out, done = [], 0
    for match in _INLINE.finditer(text):
        out.append(escape(text[done : match.start()]))
        code, strong, emphasis = match.groups()
        if code is not None:
            out.append(f"<code>{escape(code)}</code>")
        elif strong is not None:
            out.append(f"<strong>{inline(strong)}</strong>")
        else:
            out.append(f"<em>{inline(emphasis)}</em>")
        done = match.end()
    out.append(escape(text[done:]))
    return "".join(out)


def _cells(line: str) -> list[str]:
    inner = line.strip().removeprefix("|").removesuffix("|")
    return [cell.strip().replace("\\|", "|") for cell in _CELL_SPLIT.split(inner)]


def _table(header: str, rows: list[str]) -> str:
    head = "".join(f"<th>{inline(cell)}</th>" for cell in _cells(header))
    body = "".join(
        "<tr>" + "".join(f"<td>{inline(cell)}</td>" for cell in _cells(row)) + "</tr>\n" for row in rows
    )
    table = f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}</tbody></table>"
    return f'<div class="scroll">{table}</div>'


def to_html(markdown: str, image: Callable[[str], str]) -> str:
    """The body of the page: ``markdown``'s blocks as HTML; ``image`` gives the ``src`` of an image's
    Markdown path."""
    lines = markdown.split("\n")
    blocks: list[str] = []
    paragraph: list[str] = []

    def close_paragraph() -> None:
        if paragraph:
            blocks.append(f"<p>{inline(' '.join(paragraph))}</p>")
            paragraph.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        heading, picture = _HEADING.fullmatch(line), _IMAGE.fullmatch(line.strip())
        if not line.strip() or heading or picture or line.startswith(("|", "- ")):
            close_paragraph()
        if not line.strip():
            i += 1
        elif heading:
            level = len(heading.group(1))
            blocks.append(f"<h{level}>{inline(heading.group(2))}</h{level}>")
            i += 1
        elif picture:
            alt, src = picture.groups()
            blocks.append(f'<figure><img src="{image(src)}" alt="{escape(alt)}"></figure>')
            i += 1
        elif line.startswith("|") and i + 1 < len(lines) and _SEPARATOR.fullmatch(lines[i + 1].strip()):
            end = i + 2
            while end < len(lines) and lines[end].startswith("|"):
                end += 1
            blocks.append(_table(line, lines[i + 2 : end]))
            i = end
        elif line.startswith("- "):
            end = i
            while end < len(lines) and lines[end].startswith("- "):
                end += 1
            items = "".join(f"<li>{inline(item[2:])}</li>\n" for item in lines[i:end])
            blocks.append(f"<ul>\n{items}</ul>")
            i = end
        else:
            paragraph.append(line.strip())
            i += 1
    close_paragraph()
    return "\n".join(blocks)


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
    body = to_html(markdown, lambda src: data_uri(path.parent / src) or escape(src))
    path.write_text(
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{escape(title)}</title>\n'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">\n<style>{STYLE}</style>\n'
        f"</head>\n<body>\n{body}\n</body>\n</html>\n"
    )
    return path
