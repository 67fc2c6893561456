"""Fixture: outputs of kaiko-ai/eva's own ``ABMIL`` head on random padded bags.

eva at commit 73b61a797bfda8daf232f6abea2bc87ac614589c (2026-04-29). Re-run::

    git --git-dir=<mirror of kaiko-ai/eva> archive 73b61a79 src/eva/vision/models/networks/abmil.py \
        src/eva/core/models/networks/mlp.py | tar -x -C /tmp/eva
    python tools/eva_abmil_reference.py /tmp/eva/src

The two eva files are loaded by path (eva's package ``__init__`` pulls in lightning); nothing of
them is copied here. Writes ``tests/protocols/fixtures/eva_abmil.safetensors``: eva's state dict
(``w.<name>``), the inputs (``x``: bags padded with -inf as eva's ``Pad2DTensor`` does) and
eva's logits (``logits``), for three head shapes.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import torch
from safetensors.torch import save_file

OUT = Path(__file__).resolve().parents[1] / "tests" / "protocols" / "fixtures" / "eva_abmil.safetensors"
SHAPES = {  # name: (input, output, projected, attention hidden, mlp)
    "a": (24, 1, 16, 12, (16, 8)),
    "b": (20, 3, None, 10, (12,)),
    "c": (32, 1, 128, 128, (128, 64)),
}


def _load(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def main(src: str) -> None:
    root = Path(src) / "eva"
    mlp = _load("eva_mlp", root / "core" / "models" / "networks" / "mlp.py")
    for pkg in ("eva", "eva.core", "eva.core.models"):
        sys.modules.setdefault(pkg, types.ModuleType(pkg))
    nets = types.ModuleType("eva.core.models.networks")
    nets.MLP = mlp.MLP
    sys.modules["eva.core.models.networks"] = nets
    abmil = _load("eva_abmil", root / "vision" / "models" / "networks" / "abmil.py")
    tensors = {}
    for key, (d, out, proj, hid, mlp_sizes) in SHAPES.items():
        torch.manual_seed(len(key) * 7 + ord(key))
        net = abmil.ABMIL(input_size=d, output_size=out, projected_input_size=proj, hidden_size_attention=hid,
                          hidden_sizes_mlp=mlp_sizes).eval()
        x = torch.randn(5, 9, d)
        for b, n in enumerate((9, 4, 1, 7, 2)):
            x[b, n:] = float("-inf")
        with torch.no_grad():
            logits = net(x)
        tensors[f"{key}.x"] = x
        tensors[f"{key}.logits"] = logits
        for name, v in net.state_dict().items():
            tensors[f"{key}.w.{name}"] = v.contiguous()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(OUT), metadata={"eva_commit": "73b61a797bfda8daf232f6abea2bc87ac614589c"})
    print(f"wrote {OUT} ({len(tensors)} tensors)")


if __name__ == "__main__":
    main(sys.argv[1])
