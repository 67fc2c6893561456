"""vllm_vlm: a clear error without vLLM; with vLLM and a GPU, the tiny model end to end."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import medimg_bench as mb
from medimg_bench.registry import MODELS

HAS_VLLM = importlib.util.find_spec("vllm") is not None


def test_registered_as_generative():
    assert "generative" in MODELS.entry("vllm_vlm").tags


@pytest.mark.skipif(HAS_VLLM, reason="vLLM is installed")
def test_missing_vllm_is_a_clear_error():
    with pytest.raises(ImportError, match="pip install vllm"):
        mb.create_model("vllm_vlm", path="/models/any", cache=False)
    with pytest.raises(ValueError, match="model.options.path"):
        mb.create_model("vllm_vlm", cache=False)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_VLLM, reason="needs vLLM")
def test_vllm_generates_with_the_tiny_model(tiny_vlm_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    from medimg_bench.models.vlm.base import GenerationRequest

    m = mb.create_model("vllm_vlm", path=str(tiny_vlm_path), cache=False, max_model_len=512,
                        gpu_memory_utilization=0.3, max_new_tokens=8)
    img = np.random.default_rng(0).integers(0, 255, (32, 32, 3), dtype=np.uint8)
    out = m.generate([GenerationRequest(images=[img], user="what is shown?", settings=m.settings),
                      GenerationRequest(images=[img, img], user="<image> vs <image>",
                                        settings=m.settings)])
    assert all(r.error is None for r in out), [r.error for r in out]
