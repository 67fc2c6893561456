"""Per-sample records kept as per-batch columns: rows of generative tasks (text, None, lists)
and numeric columns survive a checkpoint round trip exactly."""

import numpy as np
import pandas as pd
import pytest
import torch

from medimg_bench.engine.checkpoint import _pack_items, unpack
from medimg_bench.engine.results import Records


def test_rows_and_columns_give_one_table_and_round_trip(tmp_path):
    r = Records()
    r.add({"id": np.array(["a", "a", "b", "b"], dtype=object), "class": ["x", "y", "x", "y"],
           "score": torch.tensor([0.1, 0.2, 0.3, 0.4]), "label": np.array([1.0, np.nan, 0.0, 1.0])})
    r.add([{"id": "c", "answer": "left lung", "tokens": 7}, {"id": "d", "answer": None, "tokens": 3}])
    r.add([])
    frame = r.to_frame()
    assert list(frame.columns) == ["id", "class", "score", "label", "answer", "tokens"]
    assert len(r) == len(frame) == 6
    assert frame["score"].iloc[:4].tolist() == pytest.approx([0.1, 0.2, 0.3, 0.4])
    assert frame["answer"].iloc[4] == "left lung" and pd.isna(frame["answer"].iloc[5])
    assert frame["tokens"].tolist()[4:] == [7, 3]
    torch.save(r.to_state(), tmp_path / "r.pt")
    back = Records.from_state(torch.load(tmp_path / "r.pt", weights_only=True))
    pd.testing.assert_frame_equal(back.to_frame(), frame, check_exact=True)
    order = {"d": 0, "b": 1, "a": 2, "c": 3}
    assert back.sorted_by(order).to_frame()["id"].tolist() == ["d", "b", "b", "a", "a", "c"]
    with pytest.raises(ValueError, match="different lengths"):
        r.add({"id": ["a", "b"], "score": [1.0]})


def test_packed_metric_items_unpack_to_the_same_items():
    items = [torch.rand(3, 4), torch.rand(1, 4), torch.rand(5, 4)]
    back = unpack(_pack_items(items))
    assert len(back) == 3 and all(torch.equal(a, b) for a, b in zip(items, back))
    per_sample = [torch.rand(4), torch.rand(4)]  # 1-D items are packed too, and split back
    assert all(torch.equal(a, b) for a, b in zip(per_sample, unpack(_pack_items(per_sample))))
    assert unpack(_pack_items(["s1", "s2"])) == ["s1", "s2"]
    assert unpack(_pack_items(["a\x1fb", "c"])) == ["a\x1fb", "c"]
    mixed = [torch.rand(2, 3), torch.rand(2, 5)]
    assert _pack_items(mixed) is mixed or unpack(_pack_items(mixed))[1].shape == (2, 5)
