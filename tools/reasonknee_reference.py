"""3DReasonKnee's own answer templates and reply parsing, as fixtures for
``tests/metrics/text/test_moaks.py``.

    python tools/reasonknee_reference.py [--repo /work/.mirror/rajpurkarlab+3DReasonKnee/repo]
                                         [--commit bcc32ba9a6ddfc580a3dd008a33409e2dc6df592]

Reads, at ``--commit`` of the authors' repository (a bare git directory, ``fetch
github:rajpurkarlab/3DReasonKnee``):

* ``data/question_files/questions_nobbox_{guided,zeroshot}.json`` — writes the end of each
  question, from its last "Provide your reasoning" (every question has one) — the sentences that
  ask for the answer and give its JSON template — to ``reasonknee_templates.json``, both files
  (their wording differs for a few questions), and each question's first sentence (what it asks
  about);
* ``code/zero_shot/qwen2vl.py`` and ``code/zero_shot/o1.py`` — runs *their* parse statements,
  taken from the source with ``ast`` at run time (the ``try: content_json = json.loads(...)``
  of ``call_qwen_model``, and o1's ``result_json = json.loads(result)``), on the replies of
  ``reply_corpus()`` and writes each outcome (the parsed value, or that it failed) to
  ``reasonknee_parse_reference.json``. The fixtures hold outcomes only, none of their code.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "metrics" / "text" / "data"
_TAIL = "Provide your reasoning"


def _show(repo: str, commit: str, path: str) -> str:
    return subprocess.run(["git", f"--git-dir={repo}", "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def templates(repo: str, commit: str) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for kind in ("guided", "zeroshot"):
        table = json.loads(_show(repo, commit, f"data/question_files/questions_nobbox_{kind}.json"))
        out[kind] = {qid: text[text.rfind(_TAIL):] for qid, text in table.items()}
        out[f"{kind}_openings"] = {qid: text.split("?")[0].split(". ")[0] for qid, text in table.items()}
    return out


def _statement(source: str, predicate) -> ast.stmt:
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Try) and predicate(node):
            return node
    raise SystemExit("parse statement not found")


def _qwen_parser(source: str):
    """The Try statement of ``call_qwen_model`` assigning ``content_json``, as a function of
    ``output_text``."""
    node = _statement(source, lambda n: any(isinstance(t, ast.Name) and t.id == "content_json"
                                            for s in n.body if isinstance(s, ast.Assign) for t in s.targets))
    fn = ast.FunctionDef(name="parse", args=ast.arguments(posonlyargs=[], args=[ast.arg("output_text")],
                         kwonlyargs=[], kw_defaults=[], defaults=[]),
                         body=[node, ast.Return(ast.Name("content_json", ast.Load()))], decorator_list=[])
    module = ast.fix_missing_locations(ast.Module(body=[fn], type_ignores=[]))
    scope = {"json": json}
    exec(compile(module, "qwen2vl.py", "exec"), scope)  # noqa: S102 - their statement, run here only
    return scope["parse"]


def _o1_parser(source: str):
    """o1.py's ``result_json = json.loads(result)`` (its except branch leaves ``result_json``
    unset: a failure)."""
    node = _statement(source, lambda n: any(isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name)
                                            and s.targets[0].id == "result_json" for s in n.body))
    call = next(s for s in node.body if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name)
                and s.targets[0].id == "result_json")
    expr = ast.fix_missing_locations(ast.Expression(call.value))
    code = compile(expr, "o1.py", "eval")

    def parse(result: str):
        return eval(code, {"json": json}, {"result": result})  # noqa: S307 - their expression

    return parse


def reply_corpus(seed: int = 0) -> list[str]:
    """Replies a VLM gives to a MOAKS question: valid, fenced, wrapped in prose, broken."""
    rng = random.Random(seed)
    keys = ["patella medial BML", "femur lateral central cartilage lesion", "tibia medial osteophyte",
            "medial_meniscal_cyst", "ACL"]
    items = ["Size of BML (including cyst)", "Depth of lesion", "grade", "presence", "Complete Tear"]
    out = ["", "   ", "{}", "[]", "3", "null", "\"text\"", "no lesion", "{\"a\": 1,}", "{'a': 1}",
           "```json\n{\"MOAKS_scores\": {\"x\": 1}}\n```", "```\n{\"a\": 2}\n```", "``json {\"a\": 1}``",
           "Final diagnosis: {\"a\": 1}", "{\"a\": 1} trailing words", "NaN", "{\"a\": NaN}",
           "{\"a\": 1}{\"b\": 2}", "```json\n[1, 2]\n```"]
    for _ in range(180):
        obj = {rng.choice(["MOAKS_scores", "MOAKS_grade", rng.choice(keys)]): {
            rng.choice(keys): {rng.choice(items): rng.choice([0, 1, 2, 3, 2.0, "2", True, None])}}}
        if rng.random() < 0.3:
            obj["bbox"] = [rng.randint(0, 80), rng.randint(80, 159), 10, 200, 30, 300]
        text = json.dumps(obj, indent=rng.choice([None, 2]))
        form = rng.randrange(7)
        if form == 1:
            text = f"```json\n{text}\n```"
        elif form == 2:
            text = f"Reasoning: the subregion shows no lesion.\n{text}"
        elif form == 3:
            text = text[: rng.randrange(1, len(text))]
        elif form == 4:
            text = f"```json\n{text}\n```\nThis is my answer."
        elif form == 5:
            text = text.replace('"', "'")
        out.append(text)
    return out


def _outcome(parse, reply: str) -> dict:
    try:
        value = parse(reply)
    except ValueError:
        return {"failed": True}
    return {"failed": False, "value": value}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repo", default="/work/.mirror/rajpurkarlab+3DReasonKnee/repo")
    ap.add_argument("--commit", default="bcc32ba9a6ddfc580a3dd008a33409e2dc6df592")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    meta = {"repository": "rajpurkarlab/3DReasonKnee", "commit": args.commit}
    (OUT / "reasonknee_templates.json").write_text(
        json.dumps({**meta, "templates": templates(args.repo, args.commit)}, indent=1, ensure_ascii=False) + "\n")
    qwen = _qwen_parser(_show(args.repo, args.commit, "code/zero_shot/qwen2vl.py"))
    o1 = _o1_parser(_show(args.repo, args.commit, "code/zero_shot/o1.py"))
    cases = []
    for reply in reply_corpus():
        q = qwen(reply)
        # qwen2vl.py wraps a reply it cannot read as {"response": reply}: that is its failure
        qwen_out = {"failed": True} if q == {"response": reply} else {"failed": False, "value": q}
        cases.append({"reply": reply, "qwen2vl": qwen_out, "o1": _outcome(o1, reply)})
    (OUT / "reasonknee_parse_reference.json").write_text(
        json.dumps({**meta, "cases": cases}, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(cases)} replies")


if __name__ == "__main__":
    main()
