"""hf_vlm through the tiny random LLaVA built offline: batched == one at a time, multi-image
requests, option log-likelihoods, bad input, the cache, the build lock."""

from __future__ import annotations

import os
import shutil
import threading

import numpy as np
import pytest

import medimg_bench as mb
from medimg_bench.models.vlm.base import GenerationRequest, GenerationSettings
from medimg_bench.models.vlm.hf import HFVLMAdapter, build_messages, files_signature

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


def _img(seed, shape=(40, 48, 3)):
    return np.random.default_rng(seed).integers(0, 255, shape, dtype=np.uint8)


@pytest.fixture(scope="module")
def tiny(tiny_vlm_path):
    return HFVLMAdapter(path=str(tiny_vlm_path), cache=False, batch_size=4, max_new_tokens=12)


def _reqs():
    s = GenerationSettings(max_new_tokens=12)
    return [
        GenerationRequest(images=[_img(0)], user="is there an effusion?", settings=s, sample_id="a"),
        GenerationRequest(images=[_img(1, (64, 30))], user="which organ is shown in this ct scan?",
                          settings=s, sample_id="b"),
        GenerationRequest(images=[_img(2, (3, 20, 20))], user="left or right?", settings=s,
                          system="answer with one word", sample_id="c"),
        GenerationRequest(images=[_img(3), _img(4)], user="compare <image> and <image>", settings=s,
                          sample_id="d"),
        GenerationRequest(images=[_img(5, (16, 16, 1))], user="how many nodules are there in the "
                          "upper left lung and are they calcified?", settings=s, sample_id="e"),
        GenerationRequest(images=[], user="no image: what is a pneumothorax?", settings=s,
                          sample_id="f"),
    ]


def test_batched_equals_one_at_a_time(tiny):
    reqs = _reqs()
    batched = tiny.generate(reqs)
    single = [tiny.generate([r])[0] for r in reqs]
    assert [r.error for r in batched] == [None] * len(reqs)
    assert [r.text for r in batched] == [r.text for r in single]
    assert [r.tokens_out for r in batched] == [r.tokens_out for r in single]
    assert all(r.text for r in batched)  # random words, but words
    assert all(r.finish_reason in ("stop", "length") for r in batched)
    assert all(0 < r.tokens_out <= 12 for r in batched if r.finish_reason == "length")
    assert "<|assistant|>" in batched[0].prompt and "answer with one word" in batched[2].prompt


def test_multi_image_request_places_every_image(tiny):
    s = GenerationSettings(max_new_tokens=4)
    one = GenerationRequest(images=[_img(0)], user="frames", sample_id="one", settings=s)
    five = GenerationRequest(images=[_img(i) for i in range(5)],
                             user="frame <image> frame <image> which frame shows the lesion?",
                             sample_id="five", settings=s)
    r1, r5 = tiny.generate([one, five])
    assert r1.error is None and r5.error is None
    per_image = 16  # (32 / 8) ** 2 patches per image in the tiny model
    assert r5.tokens_in - r1.tokens_in >= 4 * per_image
    assert r5.prompt.count("<image>") == 5  # the prompt as rendered, before image expansion
    messages, n = build_messages(five)
    kinds = [c["type"] for c in messages[-1]["content"]]
    assert n == 5 and kinds == ["image"] * 3 + ["text", "image", "text", "image", "text"]


def test_option_logprobs_match_the_next_token_distribution(tiny):
    words = ["yes", "no", "lung", "heart", "liver", "normal"]
    ids = [tiny.tokenizer.convert_tokens_to_ids(w) for w in words]
    req = GenerationRequest(images=[_img(7)], user="is it normal?", options=words, sample_id="mc")
    resp = tiny.generate([req])[0]
    assert resp.error is None and resp.finish_reason == "option_likelihood"
    assert len(resp.option_logprobs) == len(words)
    assert resp.text == words[int(np.argmax(resp.option_logprobs))]
    # independent path: the first-step logits of generate() on the same prompt
    text, images = tiny._render(req)
    inputs = tiny._inputs([text], [images])
    out = tiny.model.generate(**inputs, max_new_tokens=1, do_sample=False, output_logits=True,
                              return_dict_in_generate=True, pad_token_id=tiny.tokenizer.pad_token_id)
    ref = torch.log_softmax(out.logits[0][0].float(), dim=-1)[ids].tolist()
    np.testing.assert_allclose(resp.option_logprobs, ref, rtol=1e-4, atol=1e-4)
    longer = tiny.generate([GenerationRequest(images=[_img(7)], user="is it normal?",
                                              options=["normal", "normal lung", "normal lung lung"])])[0]
    lp = longer.option_logprobs
    assert lp[0] > lp[1] > lp[2]  # every extra token costs probability


def test_bad_inputs_fail_alone(tiny):
    out = tiny.generate([
        GenerationRequest(images=[np.zeros((2, 3, 4, 5), np.uint8)], user="x", sample_id="broken"),
        GenerationRequest(images=[_img(0)], user="<image> <image>", sample_id="placeholders"),
        GenerationRequest(images=[np.full((8, 8), np.nan)], user="x", sample_id="nan"),
        GenerationRequest(images=[_img(0)], user="x", options=[""], sample_id="emptyopt"),
        GenerationRequest(images=[_img(0)], user="fine", sample_id="ok"),
    ])
    assert "broken" in out[0].error and "shape" in out[0].error
    assert "placeholders" in out[1].error
    assert "nan" in out[2].error and "NaN" in out[2].error
    assert "emptyopt" in out[3].error
    assert out[4].error is None and out[4].text


def test_float_and_16_bit_images_are_scaled(tiny):
    base = np.random.default_rng(0).random((20, 20))
    r = tiny.generate([GenerationRequest(images=[(base * 4000).astype(np.uint16)], user="x"),
                       GenerationRequest(images=[base.astype(np.float32)], user="x")])
    assert r[0].error is None and r[0].text == r[1].text  # same picture after min-max scaling


def test_tiny_vlm_registered_with_cache(tiny_vlm_path, tmp_path):
    root = tiny_vlm_path.parents[1]
    m = mb.create_model("tiny_vlm", root=str(root), cache_path=str(tmp_path / "r.sqlite"))
    assert m.settings.max_new_tokens == 16 and m.fingerprint()["backend"] == "hf"
    assert m.fingerprint()["files"] == files_signature(tiny_vlm_path)
    first = m.generate(_reqs())
    assert m.cache.misses == 6
    again = m.generate(_reqs())
    assert m.cache.misses == 6 and m.cache.hits == 6
    assert [r.text for r in again] == [r.text for r in first] and all(r.cached for r in again)
    with pytest.raises(TypeError, match="generative task"):
        m.predict({"image": None})


def test_identity_follows_the_files(tiny_vlm_path, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(tiny_vlm_path, copy)
    assert files_signature(copy) == files_signature(tiny_vlm_path)
    cfg = copy / "config.json"
    cfg.write_text(cfg.read_text().replace('"projector_hidden_act": "gelu"',
                                           '"projector_hidden_act": "relu"'))
    assert files_signature(copy) != files_signature(tiny_vlm_path)


def test_weights_changed_in_the_middle_change_the_identity(tiny_vlm_path, tmp_path, monkeypatch):
    """Issue #19 item 2: files over 8 MiB were fingerprinted by size and first/last MiB, so
    weights changed in the middle kept the identity and 56 of 56 answers came from the cache."""
    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(tmp_path / "cache"))
    copy = tmp_path / "copy"
    shutil.copytree(tiny_vlm_path, copy)
    padded = copy / "extra_weights.bin"  # a weight file past the old 8 MiB sampling threshold
    padded.write_bytes(np.random.default_rng(0).integers(0, 255, 12 << 20, dtype=np.uint8).tobytes())
    os.utime(padded, (1_600_000_000, 1_600_000_000))
    before = files_signature(copy)
    with open(padded, "r+b") as fh:
        fh.seek(6 << 20)
        b = fh.read(1)
        fh.seek(6 << 20)
        fh.write(bytes([b[0] ^ 1]))
    os.utime(padded, (1_600_000_000, 1_600_000_000))  # same size, same mtime
    assert files_signature(copy) != before
    m = HFVLMAdapter(path=str(copy), cache_path=str(tmp_path / "r.sqlite"))
    assert m.fingerprint()["files"] == files_signature(copy)


def test_missing_or_wrong_path_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="model.options.path"):
        HFVLMAdapter(cache=False)
    with pytest.raises(FileNotFoundError, match="nowhere"):
        HFVLMAdapter(path=str(tmp_path / "nowhere"), cache=False)
    (tmp_path / "empty").mkdir()
    with pytest.raises(OSError, match="empty"):
        HFVLMAdapter(path=str(tmp_path / "empty"), cache=False)


def test_concurrent_first_builds_make_one_model(tmp_path):
    from medimg_bench.models.vlm.tiny import tiny_vlm_dir

    results, errors = [], []

    def build():
        try:
            results.append(tiny_vlm_dir(root=tmp_path, seed=1))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=build) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(set(results)) == 1
    siblings = sorted(p.name for p in results[0].parent.iterdir())
    assert siblings == [".v1-seed1.lock", "v1-seed1"]  # no leftover temporary folders


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_bf16_on_gpu(tiny_vlm_path):
    m = HFVLMAdapter(path=str(tiny_vlm_path), cache=False, batch_size=4).to("cuda")
    assert m.dtype == "bfloat16" and next(m.model.parameters()).device.type == "cuda"
    out = m.generate(_reqs())
    assert [r.error for r in out] == [None] * 6
    mc = m.generate([GenerationRequest(images=[_img(7)], user="is it normal?",
                                       options=["yes", "no", "normal lung"])])[0]
    assert mc.error is None and len(mc.option_logprobs) == 3
    assert all(np.isfinite(mc.option_logprobs))


def test_each_batch_is_handed_over_before_the_next_runs(tiny, monkeypatch):
    events = []
    real = tiny._generate_batch

    def logged(*args, **kwargs):
        events.append("generate")
        return real(*args, **kwargs)

    monkeypatch.setattr(tiny, "_generate_batch", logged)
    monkeypatch.setattr(tiny, "batch_size", 2)
    s = GenerationSettings(max_new_tokens=2)
    reqs = [GenerationRequest(images=[_img(i)], user=f"q{i}", settings=s) for i in range(4)]
    tiny._generate_streaming(reqs, lambda i, r: events.append(f"got {i}"))
    assert events == ["generate", "got 0", "got 1", "generate", "got 2", "got 3"]


def test_processor_kwargs_reach_the_processor_and_the_identity(tiny_vlm_path, tiny):
    m = HFVLMAdapter(path=str(tiny_vlm_path), cache=False, processor_kwargs={"do_normalize": False})
    assert m.processor.image_processor.do_normalize is False
    assert m.fingerprint() != tiny.fingerprint() and "processor_kwargs" in m.identity()
