"""`import medimg_bench` stays light: no heavy stack is imported until used."""

import subprocess
import sys

HEAVY = ("monai", "timm", "open_clip", "transformers", "SimpleITK", "pydicom", "nibabel", "torch", "matplotlib")


def test_import_is_light():
    code = (
        "import sys, medimg_bench, medimg_bench.registry;"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"heavy modules imported by `import medimg_bench`: {out.stdout}"


def test_lazy_attributes_resolve():
    import medimg_bench

    assert callable(medimg_bench.create_dataset)
    assert medimg_bench.metrics.auroc is not None
    assert "evaluate" in dir(medimg_bench)
