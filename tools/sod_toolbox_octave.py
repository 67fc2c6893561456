"""Run the authors' MATLAB evaluation toolbox (Inf-Net ``EvaluationTool`` / PraNet ``eval/``) under
GNU Octave and store its outputs as the fixtures of ``tests/metrics/test_sod_toolbox.py``.

What runs: the toolbox's own functions, at fixed commits, taken with ``git archive`` from the
authors' repositories (nothing of them is copied into this project):

* ``DengPingFan/Inf-Net`` ``EvaluationTool/`` at 4a75db7 (2020-06-28; ``main.m`` of the
  published tables) — ``StructureMeasure.m``, ``S_object.m``, ``S_region.m``,
  ``Enhancedmeasure.m``, ``original_WFb.m``;
* ``DengPingFan/PraNet`` ``eval/`` at 5393c5a (2020-06-29) — its ``Fmeasure_calu.m`` is Inf-Net's
  with one more output (IoU); the other five files above are the same git blobs in both
  repositories (checked below).

A small driver written here (``sod_driver.m``) does, per image, what ``main.m`` does per image:
``imread`` the GT (``rgb2gray`` for RGB, ``> 128`` unless logical) and the map, ``im2double`` of
the map's first channel, ``mapminmax`` to [0, 1], ``StructureMeasure``, ``MAE``, then
``Fmeasure_calu`` and ``Enhancedmeasure`` at each of the 256 thresholds — the E-measure with
``resmap > t`` (main.m up to 4a75db7) and with ``resmap >= t`` (e723632, the head) — and the
adaptive scores of main.m at f5a99a5 (threshold ``2 * mean(resmap(:))``) plus ``original_WFb``
(called by PraNet's main.m).

Two things differ between Octave and MATLAB and are handled here:

1. Octave has no ``mapminmax`` (Neural Network Toolbox). ``mapminmax.m`` below is a stand-in with
   MATLAB's documented semantics: per row ``y = (x - xmin) * gain + ymin`` with
   ``gain = (ymax - ymin) / (xmax - xmin)``, and a row with ``xmax == xmin`` (or a non-finite
   range, or a gain above 1e14) left unchanged ("y = x and no change occurs").
2. Octave's range ``1:-1/255:0`` is ``1 + k*(-1/255)`` for every k, while MATLAB's colon operator
   builds ``a:d:b`` from both ends: ``a + k*d`` for ``k < n/2`` and ``b - (n-k)*d`` for the rest
   (n = 255). The two differ in the last bit for about half of the thresholds (the script prints
   how many), which flips whole grey levels of 8-bit maps. The driver therefore uses
   ``matlab_colon_thresholds.m`` (the MATLAB values, built that way) instead of the range.

(``mean2.m`` in the same folder shadows the image package's ``mean2`` with the same arithmetic,
``sum(x(:)) / numel(x)``, checked equal at start: Octave's ``mean.m`` argument handling was most of
the run time.)

Inputs: the real COVID-SemiSeg maps and masks (``--data``; every method and class of the paper)
and the generated corpus of ``tests/metrics/_sod_corpus.py`` (1,040 maps: many sizes, 8-bit,
16-bit and 1-bit maps, constant maps, empty and full masks, 8-bit masks with grey values, masks on
the last row/column), written as PNGs.

Re-run (Debian: ``apt-get install -y octave octave-image``; about 20 minutes on 2 cores)::

    # bare git dirs of the two repositories (any clone at or after the commits named above)
    python tools/sod_toolbox_octave.py --inf-net /path/Inf-Net.git --pranet /path/PraNet.git \\
        --data ../shared/data/infnet_covid_semiseg --out tests/metrics/data/sod_toolbox_octave.npz
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.metrics._sod_corpus import corpus, digest  # noqa: E402

INF_NET_COMMIT = "4a75db7"
PRANET_COMMIT = "5393c5a"
SHARED_FILES = ("Enhancedmeasure.m", "S_object.m", "S_region.m", "StructureMeasure.m", "original_WFb.m")
N_CURVES = 8  # precision, recall, specificity, dice, f1, iou, E (>), E (>=)
FULL_CURVE_ITEMS = 48  # corpus items whose whole curves are stored

# The real folders scored by the paper: (task, method, class); maps and GT sub-folder.
BINARY = ("UNet", "UNet++", "Inf-Net", "Semi-Inf-Net")
MULTI = ("DeepLabV3Plus_Stride8", "DeepLabV3Plus_Stride16", "FCN8s_1100", "Semi-Inf-Net_FCN8s_1100",
         "Semi-Inf-Net_UNet")
CLASSES = (("Ground-glass opacities", "GT-1"), ("Consolidation", "GT-2"))

MAPMINMAX_M = r"""function y = mapminmax(x, ymin, ymax)
  % Stand-in for MATLAB's mapminmax(x, ymin, ymax) (Neural Network Toolbox), as documented:
  % each row mapped linearly so that its min -> ymin and its max -> ymax, computed as
  % (x - xoffset) .* gain + ymin; a row whose xmax == xmin, whose range is not finite, or whose
  % gain exceeds 1e14 is left unchanged (gain 1, xoffset ymin).
  xmin = min(x, [], 2); xmax = max(x, [], 2);
  xrange = xmax - xmin;
  gain = (ymax - ymin) ./ xrange;
  xoffset = xmin;
  fix = (abs(gain) > 1e14) | ~isfinite(xrange) | (xrange == 0);
  gain(fix) = 1; xoffset(fix) = ymin;
  y = bsxfun(@minus, x, xoffset);
  y = bsxfun(@times, y, gain);
  y = bsxfun(@plus, y, ymin);
end
"""

MEAN2_M = r"""function m = mean2(x)
  % Same arithmetic as the image package's mean2 (mean(x(:)), i.e. sum(x(:)) / numel(x)) without
  % mean.m's argument handling, which is most of the run time on small images.
  m = sum(x(:)) / numel(x);
end
"""

THRESHOLDS_M = r"""function t = matlab_colon_thresholds()
  % 1:-1/255:0 as MATLAB's colon operator builds it (from both ends, n = 255 intervals):
  % a + k*d for k < n/2, b - (n-k)*d for k > n/2. Octave's range gives a + k*d throughout.
  d = -1/255; k = 0:255;
  t = 1 + k * d;
  up = k >= 128;
  t(up) = 0 - (255 - k(up)) * d;
end
"""

DRIVER_M = r"""function sod_driver(list_file, out_file)
  % Per image, the steps of main.m (see tools/sod_toolbox_octave.py), one output line per image.
  Thresholds = matlab_colon_thresholds();
  fid = fopen(list_file, 'r'); out = fopen(out_file, 'w');
  line = fgetl(fid);
  while ischar(line)
    parts = strsplit(line, "\t");
    gt = imread(parts{3});
    if ndims(gt) > 2, gt = rgb2gray(gt); end
    if ~islogical(gt), gt = gt(:,:,1) > 128; end
    resmap = imread(parts{2});
    resmap = im2double(resmap(:,:,1));
    resmap = reshape(mapminmax(resmap(:)', 0, 1), size(resmap));
    S = StructureMeasure(resmap, logical(gt));
    try
      W = original_WFb(resmap, logical(gt));
    catch
      W = NaN;  % an empty mask: bwdist gives no nearest index
    end
    MAE = mean2(abs(double(logical(gt)) - resmap));
    thr = 2 * mean(resmap(:));
    [~, ~, ~, aDice] = Fmeasure_calu(resmap, double(gt), size(gt), thr);
    B = zeros(size(resmap)); B(resmap > thr) = 1; aEgt = Enhancedmeasure(B, gt);
    B = zeros(size(resmap)); B(resmap >= thr) = 1; aEge = Enhancedmeasure(B, gt);
    C = zeros(8, numel(Thresholds));
    for t = 1:numel(Thresholds)
      th = Thresholds(t);
      [C(1,t), C(2,t), C(3,t), C(4,t), C(5,t), C(6,t)] = Fmeasure_calu(resmap, double(gt), size(gt), th);
      B = zeros(size(resmap)); B(resmap > th) = 1; C(7,t) = Enhancedmeasure(B, gt);
      B = zeros(size(resmap)); B(resmap >= th) = 1; C(8,t) = Enhancedmeasure(B, gt);
    end
    fprintf(out, '%s', parts{1});
    fprintf(out, ' %.17g', [S, W, MAE, aDice, aEgt, aEge, reshape(C', 1, [])]);
    fprintf(out, '\n');
    line = fgetl(fid);
  end
  fclose(fid); fclose(out);
end
"""


def _git(git_dir: Path, *args: str) -> bytes:
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], check=True, capture_output=True).stdout


def _toolbox(inf_net: Path, pranet: Path, work: Path) -> Path:
    """The toolbox functions at the pinned commits in ``work/toolbox`` (plus the helpers)."""
    for name in SHARED_FILES:
        a = _git(inf_net, "rev-parse", f"{INF_NET_COMMIT}:EvaluationTool/{name}").strip()
        b = _git(pranet, "rev-parse", f"{PRANET_COMMIT}:eval/{name}").strip()
        if a != b:
            raise SystemExit(f"{name}: Inf-Net {INF_NET_COMMIT} and PraNet {PRANET_COMMIT} differ")
    tb = work / "toolbox"
    tb.mkdir()
    for name in SHARED_FILES:
        (tb / name).write_bytes(_git(inf_net, "show", f"{INF_NET_COMMIT}:EvaluationTool/{name}"))
    (tb / "Fmeasure_calu.m").write_bytes(_git(pranet, "show", f"{PRANET_COMMIT}:eval/Fmeasure_calu.m"))
    (tb / "mapminmax.m").write_text(MAPMINMAX_M)
    (tb / "matlab_colon_thresholds.m").write_text(THRESHOLDS_M)
    (tb / "mean2.m").write_text(MEAN2_M)
    (tb / "sod_driver.m").write_text(DRIVER_M)
    return tb


def _octave(tb: Path, code: str) -> str:
    cmd = ["octave", "--no-gui", "--no-window-system", "-q", "--eval",
           f"pkg load image; addpath('{tb}'); {code}"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0 and "ignoring const execution_exception" not in res.stderr:
        raise RuntimeError(f"octave failed: {res.stderr[-2000:]}")
    return res.stdout


def _real_items(data: Path) -> list[tuple[str, Path, Path]]:
    test = data / "Dataset" / "TestingSet"
    items = []
    for method in BINARY:
        for p in sorted((data / "Results" / "Lung infection segmentation" / method).glob("*.png")):
            items.append((f"binary/{method}/{p.stem}", p, test / "LungInfection-Test" / "GT" / p.name))
    for cls, sub in CLASSES:
        for method in MULTI:
            folder = data / "Results" / "Multi-class lung infection segmentation" / cls / method
            for p in sorted(folder.glob("*.png")):
                items.append((f"{sub}/{method}/{p.stem}", p, test / "MultiClassInfection-Test" / sub / p.name))
    return items


def _write_png(path: Path, a: np.ndarray) -> None:
    from PIL import Image

    if a.dtype == bool:
        Image.fromarray(a).convert("1").save(path)
    elif a.dtype == np.uint16:
        Image.fromarray(a).save(path)  # mode I;16
    else:
        Image.fromarray(a).save(path)  # mode L


def _check_png(path: Path, a: np.ndarray) -> None:
    from PIL import Image

    back = np.asarray(Image.open(path))
    if back.dtype != a.dtype or back.shape != a.shape or not np.array_equal(back, a):
        raise SystemExit(f"{path}: the PNG does not read back as written ({back.dtype} {back.shape})")


def _run_lists(tb: Path, items: list[tuple[str, Path, Path]], work: Path, jobs: int) -> dict[str, np.ndarray]:
    chunks = [items[k::jobs] for k in range(jobs)]

    def run(k: int) -> Path:
        lst, out = work / f"list_{k}.txt", work / f"out_{k}.txt"
        lst.write_text("".join(f"{i}\t{m}\t{g}\n" for i, m, g in chunks[k]))
        _octave(tb, f"sod_driver('{lst}', '{out}')")
        return out

    rows: dict[str, np.ndarray] = {}
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        for out in pool.map(run, range(jobs)):
            for line in out.read_text().splitlines():
                sid, *vals = line.split(" ")
                rows[sid] = np.array([float(v) for v in vals], dtype=np.float64)
    missing = [i for i, _, _ in items if i not in rows]
    if missing:
        raise SystemExit(f"octave gave no output for {len(missing)} items, e.g. {missing[:3]}")
    return rows


def _read_outputs(files: list[Path]) -> dict[str, np.ndarray]:
    rows: dict[str, np.ndarray] = {}
    for f in files:
        if f.suffix == ".npz":  # a --dump-rows file
            with np.load(f, allow_pickle=True) as d:  # our own dump (object array of floats)
                rows.update({str(k): np.asarray(v, dtype=np.float64) for k, v in zip(d["ids"], d["rows"])})
            continue
        for line in f.read_text().splitlines():
            sid, *vals = line.split(" ")
            if len(vals) == 6 + N_CURVES * 256:  # a line cut by an interrupted run is skipped
                rows[sid] = np.array([float(v) for v in vals], dtype=np.float64)
    return rows


def _run(a: argparse.Namespace, items: list, real: list) -> tuple[dict[str, np.ndarray], str]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        tb = _toolbox(a.inf_net, a.pranet, work)
        flips = _octave(tb, "t = matlab_colon_thresholds(); r = 1:-1/255:0; printf('%d\\n', sum(t ~= r));")
        same = _octave(tb, "x = rand(371, 53); printf('%d\\n', mean(x(:)) == sum(x(:)) / numel(x));")
        if same.strip() != "1":
            raise SystemExit("the mean2 stand-in does not give the image package's value")
        version = _octave(tb, "printf('%s image %s\\n', OCTAVE_VERSION, pkg('describe', 'image'){1}.version);")
        print(f"Octave range 1:-1/255:0 differs from MATLAB's colon values at {flips.strip()} of 256 thresholds")
        (work / "corpus").mkdir()
        listed = []
        for sid, pred, gt in items:
            mp, gp = work / "corpus" / f"{sid}_map.png", work / "corpus" / f"{sid}_gt.png"
            _write_png(mp, pred)
            _write_png(gp, gt)
            _check_png(mp, pred)
            _check_png(gp, gt)
            listed.append((sid, mp, gp))
        rows = _run_lists(tb, listed + real, work, a.jobs)
        if a.dump_rows:
            np.savez(a.dump_rows, ids=np.array(list(rows)), rows=np.array(list(rows.values()), dtype=object))
    return rows, version


def _pack(ids: list[str], rows: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per-image scalars and per-image means of each curve (the fixture's columns)."""
    table = np.stack([rows[i] for i in ids])
    curves = table[:, 6:].reshape(len(ids), N_CURVES, 256)
    return {"s_measure": table[:, 0], "weighted_f_measure": table[:, 1], "mae": table[:, 2],
            "adaptive_dice": table[:, 3], "adaptive_e_measure_gt": table[:, 4],
            "adaptive_e_measure_ge": table[:, 5], "curve_means": curves.mean(axis=2)}, curves


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--inf-net", type=Path, required=True, help="bare git dir of DengPingFan/Inf-Net")
    ap.add_argument("--pranet", type=Path, required=True, help="bare git dir of DengPingFan/PraNet")
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "infnet_covid_semiseg")
    ap.add_argument("--out", type=Path, default=REPO / "tests" / "metrics" / "data" / "sod_toolbox_octave.npz")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--dump-rows", type=Path, default=None, help="also save the raw rows (debugging)")
    ap.add_argument("--real-folders", default=None,
                    help="comma-separated real folders to run (e.g. binary/Inf-Net,GT-2/FCN8s_1100; default all)")
    ap.add_argument("--no-corpus", action="store_true", help="run the real maps only")
    ap.add_argument("--pack", nargs="+", type=Path, default=None,
                    help="build the fixture from driver outputs (out_*.txt) of earlier runs instead of running")
    ap.add_argument("--limit", type=int, default=None, help="first N corpus items only (a quick try)")
    a = ap.parse_args(argv)
    items = [] if a.no_corpus else corpus()[: a.limit]
    real = _real_items(a.data)
    if a.real_folders:
        keep = set(a.real_folders.split(","))
        real = [r for r in real if r[0].rsplit("/", 1)[0] in keep]
    if a.pack:
        rows = _read_outputs(a.pack)
        items = [it for it in corpus() if it[0] in rows]
        real = [r for r in _real_items(a.data) if r[0] in rows]
        version = "7.3.0 image 2.14.0 (packed from earlier driver outputs)"
    else:
        rows, version = _run(a, items, real)
    ids = [i for i, _, _ in items]
    if not ids:
        raise SystemExit("no corpus item was scored")
    corpus_cols, corpus_curves = _pack(ids, rows)
    real_ids = [i for i, _, _ in real]
    if not real_ids:
        raise SystemExit(f"no prediction maps under {a.data} (the COVID-SemiSeg folder)")
    real_cols, real_curves = _pack(real_ids, rows)
    # keep the per-folder columns only for folders whose 48 maps are all there
    out = {f"corpus_{k}": v for k, v in corpus_cols.items()}
    out.update({f"real_{k}": v for k, v in real_cols.items()})
    out["corpus_ids"] = np.array(ids)
    out["corpus_digests"] = np.array([digest(p, g) for _, p, g in items])
    out["corpus_curves_head"] = corpus_curves[:FULL_CURVE_ITEMS]
    out["real_ids"] = np.array(real_ids)
    # column means over the images of each folder (main.m's column_*), per folder
    folders = sorted(f for f in {i.rsplit("/", 1)[0] for i in real_ids}
                     if sum(i.rsplit("/", 1)[0] == f for i in real_ids) == 48)
    out["real_folders"] = np.array(folders)
    out["real_columns"] = (np.stack([real_curves[[i.rsplit("/", 1)[0] == f for i in real_ids]].mean(axis=0)
                                     for f in folders]) if folders else np.zeros((0, N_CURVES, 256)))
    out["curve_names"] = np.array(["precision", "sensitivity", "specificity", "dice", "f1", "iou",
                                   "e_measure_gt", "e_measure_ge"])
    out["provenance"] = np.array([
        f"GNU Octave {version.strip()}; DengPingFan/Inf-Net EvaluationTool @{INF_NET_COMMIT}, "
        f"DengPingFan/PraNet eval/Fmeasure_calu.m @{PRANET_COMMIT}; MATLAB colon thresholds; "
        f"mapminmax stand-in (documented semantics); generated "
        f"{datetime.date.today().isoformat()} by tools/sod_toolbox_octave.py"])
    a.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(a.out, **out)
    print(f"wrote {a.out} ({a.out.stat().st_size / 1e6:.2f} MB): {len(ids)} corpus items, {len(real_ids)} real maps")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
