import pytest
import torch

from medimg_bench.sample import SampleError, collate, decollate, pad_collate, validate_sample


def _s(i, shape=(1, 4, 4), **kw):
    return {"id": f"s{i}", "image": torch.rand(shape), "label": i % 2, "meta": {"patient_id": f"p{i}"}, **kw}


def test_collate_stacks_equal_shapes_and_keeps_meta_lists():
    b = collate([_s(0), _s(1)])
    assert b["image"].shape == (2, 1, 4, 4)
    assert b["label"].tolist() == [0, 1]
    assert b["id"] == ["s0", "s1"]
    assert b["meta"][1]["patient_id"] == "p1"


def test_collate_keeps_variable_size_images_as_list():
    b = collate([_s(0, (1, 4, 4)), _s(1, (1, 6, 5))])
    assert isinstance(b["image"], list) and b["image"][1].shape == (1, 6, 5)


def test_collate_missing_key_gives_none():
    b = collate([_s(0, report="r"), _s(1)])
    assert b["report"] == ["r", None]


def test_pad_collate_pads_and_records_original_shape():
    a = _s(0, (1, 4, 4), mask=torch.ones(4, 4, dtype=torch.long))
    c = _s(1, (1, 6, 5), mask=torch.ones(6, 5, dtype=torch.long))
    b = pad_collate([a, c])
    assert b["image"].shape == (2, 1, 6, 5) and b["mask"].shape == (2, 6, 5)
    assert b["meta"][0]["original_shape"] == (4, 4)
    assert b["mask"][0, 4:].sum() == 0 and b["mask"][0, :4, :4].sum() == 16


def test_decollate_roundtrip():
    samples = [_s(0), _s(1)]
    back = decollate(collate(samples))
    assert [s["id"] for s in back] == ["s0", "s1"]
    assert torch.equal(back[1]["image"], samples[1]["image"])


@pytest.mark.parametrize(
    "sample, message",
    [
        ({"id": "", "image": torch.rand(1, 2, 2)}, "non-empty str"),
        ({"id": "a"}, "missing key 'image'"),
        ({"id": "a", "image": torch.rand(2, 2)}, "C×H×W"),
        ({"id": "a", "image": torch.zeros(1, 2, 2, dtype=torch.uint8)}, "floating point"),
        ({"id": "a", "image": torch.rand(1, 4, 4), "mask": torch.zeros(3, 4, dtype=torch.long)}, "shape mismatch"),
        ({"id": "a", "image": torch.rand(1, 4, 4), "mask": torch.zeros(4, 4)}, "integer label map"),
        ({"id": "a", "image": torch.rand(1, 4, 4, 4), "meta": {"spacing": (1, 1)}}, "2 values for 3 spatial axes"),
        ({"id": "a", "image": torch.rand(1, 4, 4), "meta": {"spacing": (1, 0)}}, "positive"),
    ],
)
def test_validate_sample_errors_name_the_problem(sample, message):
    with pytest.raises(SampleError, match=message):
        validate_sample(sample)


def test_validate_sample_error_names_sample_and_file():
    s = {"id": "case7", "image": torch.rand(1, 4, 4), "mask": torch.zeros(3, 3, dtype=torch.long), "meta": {"path": "/x/case7.nii.gz"}}
    with pytest.raises(SampleError) as err:
        validate_sample(s)
    assert "case7" in str(err.value) and "/x/case7.nii.gz" in str(err.value)


def test_validate_task_keys():
    with pytest.raises(SampleError, match="no 'label'"):
        validate_sample({"id": "a", "image": torch.rand(1, 2, 2)}, task="classification")
    validate_sample({"id": "a", "image": torch.rand(1, 2, 2), "label": 1}, task="classification")
