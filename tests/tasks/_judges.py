"""Scripted generative adapters shared by the judge tests (tests/tasks/test_vqa_judge.py, the
letter judge of closed questions; tests/tasks/test_vqa_open_judge.py, the open-answer judge)."""

from __future__ import annotations

from collections.abc import Callable

from medimg_bench.models.vlm.base import GenerationResponse, GenerativeAdapter


class Fixed(GenerativeAdapter):
    """The model under test: answers ``text`` to every request."""

    backend = "fixed"

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def identity(self):
        return {"text": self.text}

    def _generate(self, requests):
        return [GenerationResponse(text=self.text, prompt=r.user) for r in requests]


class ScriptedJudge(GenerativeAdapter):
    """Replies ``reply(user, nth)``, where ``nth`` counts earlier requests with the same prompt;
    ``calls`` counts the requests that reach it (cache misses), ``requests`` keeps them."""

    backend = "scripted_judge"

    def __init__(self, reply: Callable[[str, int], str | None], tag: str = "j1", temperature: float = 0.0) -> None:
        super().__init__(name="judge")
        self.reply, self.tag, self.calls, self.requests, self.seen = reply, tag, 0, [], {}
        self.settings = self.settings.__class__(temperature=temperature)

    def identity(self):
        return {"judge": self.tag}

    def _generate(self, requests):
        self.calls += len(requests)
        out = []
        for r in requests:
            self.requests.append(r)
            nth = self.seen.get(r.user, 0)
            self.seen[r.user] = nth + 1
            out.append(GenerationResponse(text=self.reply(r.user, nth), prompt=r.user))
        return out


class DownJudge(ScriptedJudge):
    """A judge whose every request fails (HTTP 503); ``calls`` still counts them."""

    def __init__(self) -> None:
        super().__init__(lambda _user, _nth: "")

    def _generate(self, requests):
        self.calls += len(requests)
        return [GenerationResponse(error="HTTP 503 from judge") for _ in requests]
