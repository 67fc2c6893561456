"""The pages in a real browser: headless Chromium loads each report.html from disk (file://, no
server, no network) and the test checks what it shows — the tables with the run's numbers,
every picture decoded, no console error, no request leaving the page — and keeps a full-page
screenshot in the test's temporary folder. Skipped, with the reason, where no Chromium is
installed (Debian: `apt-get install -y chromium`)."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from medimg_bench.report import write_report
from medimg_bench.report.html import fmt, fmt_ci
from tests.report._browser import SKIP_REASON, Chromium, find_browser

BROWSER = find_browser()
pytestmark = pytest.mark.skipif(BROWSER is None, reason=SKIP_REASON)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with Chromium(BROWSER, tmp_path_factory.mktemp("chromium-profile")) as b:
        yield b


def _summary_rows(seen):
    table = next(t for t in seen["tables"] if t and t[0][:3] == ["metric", "kind", "scope"])
    return {r[0].split(" ")[0]: r for r in table[1:]}


def _check(seen, html_path, shot):
    assert seen.problems() == [], seen.problems()
    n_img = len(re.findall(r"<img ", html_path.read_text(encoding="utf-8")))
    assert len(seen["images"]) == n_img > 0
    assert all(i["complete"] and i["width"] > 0 and i["height"] > 0 for i in seen["images"])
    assert shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("which", ["cls_run", "seg_run", "vqa_run", "report_run"])
def test_each_task_page_renders_in_chromium(which, request, browser, tmp_path):
    run = request.getfixturevalue(which)
    shot = tmp_path / f"{which}.png"
    seen = browser.open_page(run / "report.html", shot)
    _check(seen, run / "report.html", shot)
    summary = json.loads((run / "summary.json").read_text())
    rows = _summary_rows(seen)
    for name, m in summary["metrics"].items():
        e = m.get("mean") or {}
        if e.get("value") is None and len(m.get("per_class") or {}) == 1:
            e = next(iter(m["per_class"].values()))
        assert rows[name][3] == fmt(e.get("value", e.get("mean"))), name
        assert rows[name][4] == fmt_ci(e.get("ci_low"), e.get("ci_high")), name
    assert {"summary", "worst", "run"} <= set(seen["sections"])
    if which == "seg_run":  # four panels per kept case, each decoded
        panels = [i for i in seen["images"] if i["alt"] in ("image", "reference", "prediction", "errors")]
        assert len(panels) == 16
    if which == "vqa_run":
        assert "the image shows a lung" in seen["text"] and "no rule could parse" in seen["text"]


def test_side_by_side_page_of_several_runs(browser, cls_run, seg_run, vqa_run, report_run, tmp_path):
    out = write_report([cls_run.parent], out=tmp_path / "runs.html")
    shot = tmp_path / "runs.png"
    seen = browser.open_page(out, shot)
    _check(seen, out, shot)
    overview = [t for t in seen["tables"] if t and t[0][:3] == ["run", "dataset", "model"]]
    assert sorted(r[0] for t in overview for r in t[1:]) == sorted(p.name for p in (cls_run, seg_run, vqa_run, report_run))


def test_the_check_fails_on_a_broken_page(browser, tmp_path):
    """The browser check can fail: a picture that does not decode, a script error, a console
    error and a request out of the page are all reported."""
    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><table><tr><td>1</td></tr></table><img alt="broken" src="data:image/png;base64,AAAA">'
                   '<img alt="remote" src="http://127.0.0.1:9/x.png"><script>console.error("boom"); undefined_fn();'
                   "</script></body></html>")
    seen = browser.open_page(bad, tmp_path / "bad.png")
    problems = "\n".join(seen.problems())
    assert "console error: boom" in problems and "exception" in problems
    assert "image 'broken' not decoded" in problems and "request to http://127.0.0.1:9/x.png" in problems


def test_a_page_copied_elsewhere_still_shows_everything(browser, seg_run, tmp_path):
    """Self-contained: the page alone, far from its run directory, shows every picture."""
    alone = tmp_path / "elsewhere" / "page.html"
    alone.parent.mkdir()
    shutil.copy(seg_run / "report.html", alone)
    seen = browser.open_page(alone, tmp_path / "alone.png")
    _check(seen, alone, tmp_path / "alone.png")
