"""HTML building blocks of the run page: escaping, number formats, tables, images as data URIs,
and the page shell (inline CSS and a few lines of inline script that sort a table when its
header is clicked; the page reads well without it). Nothing is fetched: no fonts, no scripts,
no style sheets from elsewhere."""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["esc", "fmt", "fmt_ci", "value_ci", "ci_cell", "table", "img", "section", "details", "page", "note"]

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d232a;background:#fafbfc}
main{max-width:1280px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:22px;margin:8px 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d8dee4;padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}.meta{color:#57606a;margin:2px 0}
nav a{margin-right:12px;color:#0a58ca;text-decoration:none}nav{margin:10px 0;position:sticky;top:0;background:#fafbfc;padding:6px 0;z-index:2}
table{border-collapse:collapse;margin:6px 0 12px;background:#fff;font-variant-numeric:tabular-nums}
th,td{border:1px solid #d8dee4;padding:3px 8px;text-align:left;vertical-align:top}td.ci,td.num{white-space:nowrap}small.ci{color:#57606a;margin-left:4px}
th{background:#f1f3f5;position:relative}th.sortable{cursor:pointer}td.num,th.num{text-align:right}
tr.macro td{font-weight:600;background:#f6f8fa}td.bad{color:#b42318;font-weight:600}td.good{color:#1a7f37}
.note{color:#57606a;font-size:13px;margin:4px 0 10px}.warn{color:#9a6700}
.cards{display:flex;flex-wrap:wrap;gap:14px}.card{background:#fff;border:1px solid #d8dee4;border-radius:6px;padding:10px;max-width:100%}
.card h4{margin:0 0 6px;font-size:14px;word-break:break-all}.panels{display:flex;gap:6px;flex-wrap:wrap}
.panel{text-align:center;font-size:12px;color:#57606a}.panel img{display:block;image-rendering:pixelated;border:1px solid #d8dee4}
pre{background:#f6f8fa;border:1px solid #d8dee4;padding:8px;overflow:auto;max-height:420px;font-size:12px;white-space:pre-wrap}
.text{white-space:pre-wrap;max-width:520px}.plots img{max-width:100%;border:1px solid #d8dee4;background:#fff}
.legend span{display:inline-block;width:12px;height:12px;margin:0 4px -2px 10px;border:1px solid #888}
.runs{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:16px}
.scroll{overflow-x:auto;max-width:100%}details>summary{cursor:pointer;font-weight:600;margin:6px 0}.tag{font-size:12px;background:#eef1f4;border-radius:4px;padding:1px 6px;margin-left:6px}
"""

# sorts a table by the clicked column (numbers as numbers, text otherwise); optional
_SCRIPT = """
document.querySelectorAll('table.sortable').forEach(function(t){
 t.querySelectorAll('th').forEach(function(th,i){th.classList.add('sortable');th.addEventListener('click',function(){
  var b=t.tBodies[0],rows=Array.prototype.slice.call(b.rows),asc=th.dataset.dir!=='asc';th.dataset.dir=asc?'asc':'desc';
  function key(r){var c=r.cells[i];var v=c?(c.dataset.v!==undefined?c.dataset.v:c.textContent):'';var n=parseFloat(v);return isNaN(n)?v:n;}
  rows.sort(function(x,y){var a=key(x),c=key(y);if(typeof a!==typeof c){return typeof a==='number'?-1:1;}return (a<c?-1:a>c?1:0)*(asc?1:-1);});
  rows.forEach(function(r){b.appendChild(r);});});});});
function openTarget(){var t=location.hash&&document.getElementById(location.hash.slice(1));
 while(t){if(t.tagName==='DETAILS'){t.open=true;}t=t.parentElement;}}
window.addEventListener('hashchange',openTarget);openTarget();
"""


def esc(value: Any) -> str:
    """``value`` as HTML-escaped text (None and NaN as empty)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return html.escape(str(value), quote=True)


def fmt(value: Any, digits: int = 3) -> str:
    """A number with ``digits`` decimals (integers as they are, missing as an em dash)."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    try:
        v = float(value)
    except (TypeError, ValueError):
        return esc(value)
    if math.isnan(v):
        return "—"
    if v != 0 and (abs(v) >= 1e5 or abs(v) < 10 ** -digits):
        return f"{v:.{digits}g}"
    return f"{v:.{digits}f}"


def fmt_ci(low: Any, high: Any, digits: int = 3) -> str:
    """``[low, high]``, or an em dash when both are missing."""
    if low is None and high is None:
        return "—"
    return f"[{fmt(low, digits)}, {fmt(high, digits)}]"


def value_ci(value: Any, low: Any, high: Any, digits: int = 3) -> dict[str, Any]:
    """A table cell holding a value and its interval, sorted by the value."""
    v = None if value is None else float(value)
    ci = "" if low is None and high is None else f" <small class=\"ci\">{fmt_ci(low, high, digits)}</small>"
    return {"html": fmt(v, digits) + ci, "sort": "" if v is None or math.isnan(v) else v, "cls": "num"}


def ci_cell(low: Any, high: Any, digits: int = 3) -> dict[str, Any]:
    """An interval as a table cell (kept on one line)."""
    return {"html": fmt_ci(low, high, digits), "cls": "ci"}


def _cell(value: Any, tag: str) -> str:
    if isinstance(value, Mapping):  # {"html": ..., "sort": ..., "cls": ...}
        attrs = f' class="{value["cls"]}"' if value.get("cls") else ""
        if value.get("sort") is not None:
            attrs += f' data-v="{esc(value["sort"])}"'
        return f"<{tag}{attrs}>{value.get('html', '')}</{tag}>"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f'<{tag} class="num">{fmt(value)}</{tag}>'
    return f"<{tag}>{esc(value)}</{tag}>"


def table(columns: Sequence[str], rows: Iterable[Sequence[Any]], *, cls: str = "", sortable: bool = True,
          row_classes: Sequence[str] | None = None) -> str:
    """A ``<table>`` (no header row when ``columns`` is empty) in a horizontally scrolling box; a
    cell is text (escaped), a number (formatted) or a dict with ``html`` (already escaped) and
    optional ``sort`` / ``cls``."""
    classes = " ".join(c for c in (cls, "sortable" if sortable and columns else "") if c)
    head = "<thead><tr>" + "".join(f"<th>{esc(c)}</th>" for c in columns) + "</tr></thead>" if columns else ""
    body = []
    for k, row in enumerate(rows):
        rc = row_classes[k] if row_classes and k < len(row_classes) and row_classes[k] else ""
        attr = f' class="{rc}"' if rc else ""
        body.append(f"<tr{attr}>" + "".join(_cell(v, "td") for v in row) + "</tr>")
    return f'<div class="scroll"><table class="{classes}">{head}<tbody>{"".join(body)}</tbody></table></div>'


def img(png: bytes, *, alt: str, width: int | None = None, title: str | None = None) -> str:
    """An ``<img>`` holding ``png`` as a base64 data URI."""
    data = base64.b64encode(png).decode("ascii")
    w = f' width="{int(width)}"' if width else ""
    t = f' title="{esc(title)}"' if title else ""
    return f'<img src="data:image/png;base64,{data}" alt="{esc(alt)}"{w}{t}>'


def note(text: str, *, warn: bool = False) -> str:
    """A short explanatory paragraph (``text`` is escaped)."""
    return f'<p class="note{" warn" if warn else ""}">{esc(text)}</p>'


def section(sid: str, title: str, body: str) -> str:
    """An ``<section>`` with an ``<h2>`` (``body`` is HTML)."""
    return f'<section id="{esc(sid)}"><h2>{esc(title)}</h2>{body}</section>'


def details(summary: str, body: str, *, open_: bool = False) -> str:
    """A collapsible block (``summary`` is escaped, ``body`` is HTML)."""
    return f'<details{" open" if open_ else ""}><summary>{esc(summary)}</summary>{body}</details>'


def page(title: str, body: str, *, nav: Sequence[tuple[str, str]] = ()) -> str:
    """The whole document: inline CSS, ``nav`` links (anchor, label), ``body``, the sort script."""
    links = "".join(f'<a href="#{esc(a)}">{esc(label)}</a>' for a, label in nav)
    nav_html = f"<nav>{links}</nav>" if links else ""
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        # no request may leave the page: images are data URIs, nothing else is loaded
        '<link rel="icon" href="data:,">'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; "
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">"
        f"<title>{esc(title)}</title><style>{_CSS}</style></head><body><main>"
        f"{nav_html}{body}</main><script>{_SCRIPT}</script></body></html>"
    )
