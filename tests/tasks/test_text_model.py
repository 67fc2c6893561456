"""text_model_generate: a generative adapter as the GREEN model (greedy, cached, errors named)."""

from __future__ import annotations

import pytest

from medimg_bench.metrics.text.green import Green
from medimg_bench.models.vlm.base import GenerativeAdapter
from medimg_bench.models.vlm.requests import GenerationResponse
from medimg_bench.tasks.text_model import text_model_generate

REPLY = ("[Explanation]:\nclose.\n\n[Clinically Significant Errors]:\n(a) False report of a finding in the "
         "candidate: 1. nodule.\n(b) Missing a finding present in the reference: 0.\n\n"
         "[Matched Findings]:\n3. effusion; edema; cardiomegaly.")


class ScriptedGreen(GenerativeAdapter):
    backend = "scripted_green"

    def __init__(self, fail: bool = False):
        super().__init__(name="green_model")
        self.requests, self.fail = [], fail

    def identity(self):
        return {"green": "scripted"}

    def _generate(self, requests):
        self.requests += list(requests)
        if self.fail:
            return [GenerationResponse(error="server down", prompt=r.user) for r in requests]
        return [GenerationResponse(text=REPLY, prompt=r.user) for r in requests]


def test_adapter_as_green_model() -> None:
    adapter = ScriptedGreen()
    m = Green(generate=text_model_generate(adapter, max_new_tokens=1024))
    m.update(["effusion and a nodule"], ["effusion, edema, cardiomegaly"])
    assert m.compute()[0].item() == pytest.approx(3 / 4)
    (req,) = adapter.requests
    assert req.settings.temperature == 0.0 and req.settings.max_new_tokens == 1024
    assert "effusion and a nodule" in req.user and req.images == []
    ident = m.identity()
    assert ident["prompt"] == "medimg_bench" and len(ident["prompt_sha256"]) == 64
    assert ident["model"] == adapter.fingerprint()


def test_failed_request_is_an_error() -> None:
    m = Green(generate=text_model_generate(ScriptedGreen(fail=True)))
    with pytest.raises(RuntimeError, match="pair 0 failed: server down"):
        m.update(["a"], ["b"])


def test_green_requests_go_through_the_response_cache(tmp_path) -> None:
    first = ScriptedGreen()
    first.attach_cache(cache_path=tmp_path / "responses.sqlite")
    a = Green(generate=text_model_generate(first))
    a.update(["effusion and a nodule"], ["effusion, edema, cardiomegaly"])
    again = ScriptedGreen()
    again.attach_cache(cache_path=tmp_path / "responses.sqlite")
    b = Green(generate=text_model_generate(again))
    b.update(["effusion and a nodule"], ["effusion, edema, cardiomegaly"])
    assert len(first.requests) == 1 and again.requests == []  # the re-run asked the model nothing
    assert b.compute().tolist() == a.compute().tolist()
    c = Green(generate=text_model_generate(again, max_new_tokens=99))
    c.update(["effusion and a nodule"], ["effusion, edema, cardiomegaly"])
    assert len(again.requests) == 1  # other settings: a new request
