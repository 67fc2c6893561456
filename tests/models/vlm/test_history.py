"""Multi-turn requests (GenerationRequest.history): the messages each backend sends, the prompt
recorded and the response-cache key."""

from __future__ import annotations

import numpy as np
import pytest

from medimg_bench.models.vlm.base import ChatTurn, GenerationRequest
from medimg_bench.models.vlm.cache import request_key
from medimg_bench.models.vlm.hf import build_messages
from medimg_bench.models.vlm.openai import chat_messages

IMG = np.full((4, 5, 3), 7, np.uint8)
IMG2 = np.full((4, 5, 3), 9, np.uint8)


def _conversation():
    return GenerationRequest(images=[IMG2], user="and this mask?", system="be brief", sample_id="s1",
                             history=[ChatTurn(user="<image>\nIs the heart big?", reply="FINAL ANSWER: (a) Yes", images=[IMG]),
                                      ChatTurn(user="Which criterion?", reply="(a) ratio")])


def test_openai_messages_carry_the_earlier_turns():
    msgs = chat_messages(_conversation())
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert msgs[1]["content"][0]["type"] == "image_url" and msgs[1]["content"][1]["text"] == "\nIs the heart big?"
    assert msgs[2]["content"] == "FINAL ANSWER: (a) Yes" and msgs[3]["content"] == [{"type": "text", "text": "Which criterion?"}]
    assert msgs[5]["content"][0]["type"] == "image_url" and msgs[5]["content"][1]["text"] == "and this mask?"
    plain = GenerationRequest(images=[], user="hi", system="be brief")
    assert chat_messages(plain) == [{"role": "system", "content": "be brief"},
                                    {"role": "user", "content": [{"type": "text", "text": "hi"}]}]


def test_hf_messages_and_image_order():
    req = _conversation()
    msgs, n = build_messages(req)
    assert n == 2 and [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert msgs[1]["content"] == [{"type": "image"}, {"type": "text", "text": "\nIs the heart big?"}]
    assert msgs[2]["content"] == [{"type": "text", "text": "FINAL ANSWER: (a) Yes"}]
    assert [im is IMG for im in req.all_images()] == [True, False]
    bad = GenerationRequest(images=[], user="x", history=[ChatTurn(user="<image><image>", reply="r", images=[IMG])])
    with pytest.raises(ValueError, match="turn 0.*2 <image> placeholders"):
        build_messages(bad)


def test_history_is_in_the_prompt_and_the_cache_key():
    req = _conversation()
    plain = GenerationRequest(images=[IMG2], user="and this mask?", system="be brief", sample_id="s1")
    assert '"history"' in req.rendered_prompt() and '"history"' not in plain.rendered_prompt()
    fp = {"model": "m"}
    keys = {request_key(fp, plain), request_key(fp, req)}
    other = _conversation()
    other.history[0].images = [IMG2]  # same text, another earlier image
    keys.add(request_key(fp, other))
    other2 = _conversation()
    other2.history[1].reply = "(b) width"
    keys.add(request_key(fp, other2))
    assert len(keys) == 4 and request_key(fp, _conversation()) == request_key(fp, req)
