"""Response cache: zero model calls on a re-run, errors and non-deterministic requests not
served, kill -9 loses nothing received, several processes share one file, the CLI."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from medimg_bench.models.vlm.base import GenerationSettings
from medimg_bench.models.vlm.cache import ResponseCache, cli_main, request_key
from tests.models.vlm._helpers import CountingAdapter, make_requests

REPO = Path(__file__).resolve().parents[3]


def _rows(path: Path) -> int:
    conn = sqlite3.connect(str(path), timeout=30)
    try:
        return conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
    except sqlite3.OperationalError:  # table not created yet
        return 0
    finally:
        conn.close()


def test_rerun_makes_zero_model_calls(tmp_path):
    a = CountingAdapter()
    a.cache = ResponseCache(tmp_path / "r.sqlite")
    reqs = make_requests(20)
    first = a.generate(reqs)
    assert a.calls == 20 and not any(r.cached for r in first)
    b = CountingAdapter()  # a new process would build a new adapter and cache object
    b.cache = ResponseCache(tmp_path / "r.sqlite")
    second = b.generate(make_requests(20))
    assert b.calls == 0 and b.cache.hits == 20 and b.cache.misses == 0
    assert all(r.cached for r in second)
    assert [r.text for r in second] == [r.text for r in first]
    assert [r.prompt for r in second] == [r.prompt for r in first]


def test_key_covers_model_prompt_pixels_and_settings():
    req = make_requests(1)[0]
    fp = {"backend": "fake", "model": "x"}
    k = request_key(fp, req)
    assert request_key(dict(fp), replace(req)) == k
    img = req.images[0].copy()
    img[0, 0, 0] ^= 1
    assert request_key(fp, replace(req, images=[img])) != k
    assert request_key(fp, replace(req, user=req.user + " ")) != k
    assert request_key(fp, replace(req, system="be brief")) != k
    assert request_key(fp, replace(req, settings=GenerationSettings(max_new_tokens=7))) != k
    assert request_key({**fp, "model": "y"}, req) != k
    assert request_key(fp, replace(req, options=["yes", "no"])) != k
    assert request_key(fp, replace(req, sample_id="other")) == k  # ids do not change answers


def test_errors_are_not_cached_so_a_resume_retries_them(tmp_path):
    a = CountingAdapter()
    a.cache = ResponseCache(tmp_path / "r.sqlite")
    reqs = make_requests(3) + make_requests(1, prefix="[[fail]]")
    out = a.generate(reqs)
    assert out[-1].error == "boom" and a.calls == 4
    out = a.generate(reqs)
    assert a.calls == 5 and out[-1].error == "boom" and all(r.cached for r in out[:3])
    assert len(a.cache) == 3


class _BlankAdapter(CountingAdapter):
    """Answers each request with the text after ``say:`` in its prompt."""

    def _generate(self, requests):
        out = super()._generate(requests)
        for r, resp in zip(requests, out):
            resp.text = r.user.split("say:", 1)[1].rsplit(" ", 1)[0]  # less make_requests' " 0?"
        return out


@pytest.mark.parametrize("blank", ["", "  \n", "\u200b", "\u200b\u200d \u2060", "\ufeff", "\u00a0\u3000"])
def test_blank_answers_are_not_cached(tmp_path, blank):
    """Issue #35 item 6: an answer of only U+200B was cached; zero-width and other format
    characters are as empty as whitespace, so a re-run asks again."""
    a = _BlankAdapter()
    a.cache = ResponseCache(tmp_path / "r.sqlite")
    reqs = make_requests(1, prefix=f"say:{blank}") + make_requests(1, prefix="say:x\u200b")
    a.generate(reqs)
    assert len(a.cache) == 1  # the visible answer only
    out = a.generate(reqs)
    assert a.calls == 3 and not out[0].cached and out[1].cached and out[1].text.startswith("x")


def test_nondeterministic_requests_not_served_unless_asked(tmp_path):
    hot = GenerationSettings(temperature=0.7, seed=None)
    a = CountingAdapter()
    a.cache = ResponseCache(tmp_path / "r.sqlite")
    a.generate(make_requests(4, settings=hot))
    a.generate(make_requests(4, settings=hot))
    assert a.calls == 8  # asked again each time
    a.cache = ResponseCache(tmp_path / "r.sqlite", serve_nondeterministic=True)
    out = a.generate(make_requests(4, settings=hot))
    assert a.calls == 8 and all(r.cached for r in out)
    seeded = GenerationSettings(temperature=0.7, seed=3)  # sampling with a seed is repeatable
    a.cache = ResponseCache(tmp_path / "r.sqlite")
    a.generate(make_requests(4, settings=seeded))
    a.generate(make_requests(4, settings=seeded))
    assert a.calls == 12


def test_responses_keep_order_with_a_mix_of_hits_and_misses(tmp_path):
    a = CountingAdapter()
    a.cache = ResponseCache(tmp_path / "r.sqlite")
    reqs = make_requests(10)
    a.generate(reqs[::2])
    out = a.generate(reqs)
    assert a.calls == 10
    assert [r.cached for r in out] == [True, False] * 5
    assert [r.text for r in out] == [f"reply to q {i}? (1 images)" for i in range(10)]


def test_corrupt_cache_file_is_a_clear_error(tmp_path):
    path = tmp_path / "r.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    a = CountingAdapter()
    a.cache = ResponseCache(path)
    with pytest.raises(sqlite3.DatabaseError, match="r.sqlite"):
        a.generate(make_requests(1))


def test_cli_stats_export_clear(tmp_path, capsys):
    path = tmp_path / "r.sqlite"
    for tag, n in (("m1", 3), ("m2", 5)):
        a = CountingAdapter(tag)
        a.cache = ResponseCache(path)
        a.generate(make_requests(n, prefix=tag))
    assert cli_main(["--path", str(path), "stats", "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert st["entries"] == 8 and st["size_bytes"] > 0
    assert st["models"] == {"fake-m2 (fake)": 5, "fake-m1 (fake)": 3}
    assert cli_main(["stats", "--path", str(path)]) == 0
    assert "8 entries" in capsys.readouterr().out
    out = tmp_path / "dump.jsonl"
    assert cli_main(["--path", str(path), "export", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 8 and {r["model"] for r in rows} == {"fake-m1", "fake-m2"}
    assert rows[0]["response"]["text"].startswith("reply to m1 0?")
    assert rows[0]["sample_id"] == "m10" and rows[0]["settings"]["temperature"] == 0.0
    assert cli_main(["--path", str(path), "clear", "--model", "fake-m1"]) == 0
    assert "deleted 3" in capsys.readouterr().out
    assert _rows(path) == 5
    assert cli_main(["--path", str(path), "clear"]) == 0
    assert _rows(path) == 0
    assert cli_main(["--path", str(tmp_path / "none.sqlite"), "stats"]) == 1


_WORKER = """
import sys
from medimg_bench.models.vlm.cache import ResponseCache
from tests.models.vlm._helpers import CountingAdapter, make_requests
tag, path = sys.argv[1], sys.argv[2]
a = CountingAdapter()
a.cache = ResponseCache(path)
shared = make_requests(40, prefix="shared")
own = make_requests(40, prefix="own" + tag)
for r in [x for pair in zip(shared, own) for x in pair]:
    a.generate([r])
print(a.calls)
"""


def test_four_processes_share_one_cache(tmp_path):
    path = tmp_path / "r.sqlite"
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, str(i), str(path)], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(4)]
    results = [p.communicate(timeout=120) for p in procs]
    for p, (_out, err) in zip(procs, results):
        assert p.returncode == 0, err
    calls = [int(out.split()[-1]) for out, _ in results]
    assert all(40 <= c <= 80 for c in calls)
    assert _rows(path) == 40 + 4 * 40
    a = CountingAdapter()
    a.cache = ResponseCache(path)
    reqs = make_requests(40, prefix="shared") + [
        r for i in range(4) for r in make_requests(40, prefix=f"own{i}")]
    out = a.generate(reqs)
    assert a.calls == 0 and all(r.cached for r in out)


_KILLED = """
import sys
from medimg_bench.models.vlm.cache import ResponseCache
from tests.models.vlm._helpers import SlowStreamingAdapter, make_requests
a = SlowStreamingAdapter(delay=0.02)
a.cache = ResponseCache(sys.argv[1])
a.generate(make_requests(400))
print("finished")
"""


def test_kill_9_mid_run_then_resume_loses_nothing_received(tmp_path):
    path = tmp_path / "r.sqlite"
    proc = subprocess.Popen([sys.executable, "-c", _KILLED, str(path)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and (not path.exists() or _rows(path) < 25):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL and "finished" not in out, err
    saved = _rows(path)
    assert 25 <= saved < 400
    a = CountingAdapter()
    a.cache = ResponseCache(path)
    resumed = a.generate(make_requests(400))
    assert a.calls == 400 - saved  # every response received before the kill is reused
    assert sum(r.cached for r in resumed) == saved
    assert resumed[:saved] == [r for r in resumed[:saved] if r.cached]  # received in order
    fresh = CountingAdapter()._generate(make_requests(400))
    assert [r.text for r in resumed] == [r.text for r in fresh]


def test_cache_object_pickles_without_its_connection(tmp_path):
    import pickle

    c = ResponseCache(tmp_path / "r.sqlite")
    a = CountingAdapter()
    a.cache = c
    a.generate(make_requests(2))
    c2 = pickle.loads(pickle.dumps(c))
    assert len(c2) == 2
    assert np.isfinite(c2.size_bytes())


def test_medimg_bench_cache_command(tmp_path):
    path = tmp_path / "responses.sqlite"
    a = CountingAdapter()
    a.cache = ResponseCache(path)
    a.generate(make_requests(4))
    a.cache.close()
    env = {**os.environ, "MEDIMG_BENCH_CACHE": str(tmp_path)}  # the default path follows it
    res = subprocess.run([sys.executable, "-m", "medimg_bench.cli", "cache", "stats"], cwd=REPO,
                         env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert f"{path}: 4 entries" in res.stdout and "fake-m1 (fake)" in res.stdout


def test_repeated_request_in_one_call_is_asked_once(tmp_path):
    a = CountingAdapter()
    a.cache = ResponseCache(tmp_path / "r.sqlite")
    r = make_requests(2)
    out = a.generate([r[0], r[1], r[0], r[0]])
    assert a.calls == 2 and [x.text for x in out] == [out[0].text, out[1].text, out[0].text, out[0].text]
    assert [x.cached for x in out] == [False, False, True, True]
    hot = make_requests(1, settings=GenerationSettings(temperature=1.0, seed=None))[0]
    a.generate([hot, hot])
    assert a.calls == 4  # unseeded samples are independent draws
