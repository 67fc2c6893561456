"""Retrieval ranks against a model whose right answer is known, and with a tiny CLIP."""

import numpy as np
import pandas as pd
import pytest
import torch

from medimg_bench.datasets.reports import ReportDataset
from medimg_bench.protocols.run import retrieval_scores


@pytest.fixture()
def reports(tmp_path):
    from PIL import Image

    rows = []
    for i in range(8):
        Image.fromarray(np.full((8, 8), i * 30, dtype=np.uint8)).save(tmp_path / f"{i}.png")
        rows.append({"id": f"r{i}", "patient_id": f"p{i // 2}", "report": f"report {i}", "image_path": f"{i}.png"})
    return ReportDataset(pd.DataFrame(rows), root=tmp_path, name="toy_reports")


class _Oracle:
    """Image i and report ``perm[i]`` share a one-hot embedding."""

    def __init__(self, perm):
        self.perm, self.device = perm, torch.device("cpu")
        self.info = {"image_size": 8, "mean": None, "std": None}
        oracle = self

        class M:
            def encode_image(self, x):
                i = round(float(x.mean()) * 255 / 30)
                return torch.nn.functional.one_hot(torch.tensor([oracle.perm[i]]), 8).float()

        self.module = M()

    def _embed_texts(self, texts):
        return torch.nn.functional.one_hot(torch.tensor([int(t.split()[1]) for t in texts]), 8).float()


def test_perfect_and_shifted_retrieval(reports):
    summary, samples = retrieval_scores(_Oracle(list(range(8))), reports, n_resamples=50)
    m = summary["metrics"]
    assert m["i2t_R@1"]["mean"]["value"] == 1.0 and m["t2i_mean_rank"]["mean"]["value"] == 1.0
    # image i matches report i+1: its own report has similarity 0, tied last among 7 zeros → rank 8
    summary, _ = retrieval_scores(_Oracle([(i + 1) % 8 for i in range(8)]), reports, n_resamples=50, ks=(1, 5))
    m = summary["metrics"]
    assert m["i2t_R@1"]["mean"]["value"] == 0.0 and m["i2t_mean_rank"]["mean"]["value"] == 8.0
    assert m["i2t_mean_rank"]["higher_is_better"] is False
    assert set(samples.columns) >= {"id", "patient_id", "i2t_R@1", "t2i_R@10"}


def test_tiny_clip_retrieval_has_cis(reports):
    from medimg_bench.registry import create_model
    from tests.models.test_clip import TINY

    torch.manual_seed(0)
    model = create_model("clip", model_cfg=TINY)
    summary, _ = retrieval_scores(model, reports, n_resamples=100)
    r10 = summary["metrics"]["i2t_R@10"]["mean"]
    assert r10["value"] == 1.0  # 8 candidates: everything is within 10
    r1 = summary["metrics"]["t2i_R@1"]["mean"]
    assert r1["ci_low"] <= r1["value"] <= r1["ci_high"]
