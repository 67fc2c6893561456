"""The METEOR Java process never outlives a call (issue #19, item 14): empty input is refused
before Java starts, and a failure inside pycocoevalcap's ``compute_score`` (which leaves its
lock held, so its ``__del__`` used to hang the interpreter at exit) still ends the process.
Each case runs in a fresh interpreter that must exit on its own."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from medimg_bench.metrics.text.nlg import java_available

ROOT = Path(__file__).resolve().parents[3]


def _run(code: str, timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    try:
        return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                              timeout=timeout, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired as exc:  # the bug this guards against
        pytest.fail(f"the interpreter did not exit within {timeout} s: {exc.stdout!r} {exc.stderr!r}")


def test_empty_input_is_refused_before_meteor_starts_and_the_interpreter_exits():
    # in a subprocess: were Java started and left, this process would hang, not fail
    out = _run("""
        from medimg_bench.metrics.text.nlg import meteor_scores, report_text_scores
        for call in (lambda: report_text_scores([], []), lambda: report_text_scores([], [], meteor=True),
                     lambda: meteor_scores([], [])):
            try:
                call()
            except ValueError as exc:
                print("refused:", exc)
    """, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("refused: report_text_scores: no reports to score (empty input)") == 2
    assert "refused: meteor_scores: no reports to score (empty input)" in out.stdout


@pytest.mark.skipif(not java_available(), reason="METEOR needs Java (no 'java' on the PATH)")
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="child processes are read from /proc")
def test_a_failing_meteor_call_ends_java_and_the_interpreter_exits():
    pytest.importorskip("pycocoevalcap")
    out = _run("""
        import os
        from pycocoevalcap.meteor import meteor
        from medimg_bench.metrics.text.nlg import meteor_scores

        def broken(self, hypothesis, references):  # fails while compute_score holds its lock
            raise RuntimeError("simulated METEOR failure")

        meteor.Meteor._stat = broken
        try:
            meteor_scores(["small effusion"], ["small left effusion"])
        except RuntimeError as exc:
            print("raised:", exc)

        def children():
            me = str(os.getpid())
            kids = []
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    stat = open(f"/proc/{pid}/stat").read()
                except OSError:
                    continue
                if stat.rsplit(")", 1)[1].split()[1] == me:
                    kids.append(pid)
            return kids

        print("children:", children())
    """, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "raised: simulated METEOR failure" in out.stdout
    assert "children: []" in out.stdout, out.stdout  # the Java process was killed and reaped
