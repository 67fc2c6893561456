"""Shared machinery of the CT/MRI loaders: a volume dataset over a manifest and 2D slices of it.

Axis order: images are ``C×X×Y×Z`` float32 where X, Y, Z are the NIfTI array axes (i, j, k) as
stored (or as reoriented with ``orientation=``); masks are int64 ``X×Y×Z`` label maps (or
``K×X×Y×Z`` binary region channels). ``meta["spacing"]`` is mm per spatial axis in that order and
``meta["affine"]`` the RAS voxel → world matrix of the returned array.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from medimg_bench.datasets.base import ManifestDataset
from medimg_bench.datasets.grid import align_to_image_grid
from medimg_bench.sample import SampleError

__all__ = ["VolumeDataset", "SliceDataset", "resample_volume", "read_volume", "nifti_stem"]

_NIFTI_SUFFIXES = (".nii.gz", ".nii")


def nifti_stem(name: str) -> str:
    """File name without ``.nii.gz`` / ``.nii``."""
    for suffix in _NIFTI_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def read_volume(path: Path) -> tuple[np.ndarray, dict[str, Any]]:
    """Read a NIfTI file or a DICOM series directory (the loaders' two volume sources)."""
    from medimg_bench.datasets.io import check_pixels, read_dicom_series, read_image, read_nifti

    if path.is_dir():
        array, meta = read_dicom_series(path)
    elif path.name.lower().endswith(_NIFTI_SUFFIXES):
        array, meta = read_nifti(path)
    else:
        return read_image(path)  # checks its pixels itself
    check_pixels(array, path)
    return array, meta


def resample_volume(
    image: np.ndarray,
    mask: np.ndarray | None,
    affine: np.ndarray,
    spacing: Sequence[float],
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """Resample a ``C×X×Y×Z`` image (trilinear) and its mask (nearest) to ``spacing`` mm with
    MONAI's ``Spacing``; both get the same output grid. Returns (image, mask, new affine)."""
    try:
        from monai.data import MetaTensor
        from monai.transforms import Spacing
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("resampling needs MONAI: pip install monai") from exc

    aff = torch.as_tensor(affine, dtype=torch.float64)
    img = MetaTensor(torch.from_numpy(np.ascontiguousarray(image, dtype=np.float32)), affine=aff)
    out = Spacing(pixdim=tuple(float(s) for s in spacing), mode="bilinear", padding_mode="border")(
        img
    )
    new_affine = np.asarray(out.affine, dtype=np.float64)
    out_mask = None
    if mask is not None:
        m = mask if mask.ndim == image.ndim else mask[None]
        mt = MetaTensor(torch.from_numpy(np.ascontiguousarray(m, dtype=np.float32)), affine=aff)
        mo = Spacing(pixdim=tuple(float(s) for s in spacing), mode="nearest", padding_mode="zeros")(
            mt
        )
        out_mask = np.rint(np.asarray(mo.array)).astype(np.int64)
        if mask.ndim != image.ndim:
            out_mask = out_mask[0]
    return np.asarray(out.array, dtype=np.float32), out_mask, new_affine


class VolumeDataset(ManifestDataset):
    """3D image (+ label map) dataset over a manifest.

    Manifest columns: ``id``, ``patient_id``, ``image`` (a path, a DICOM series folder, or a list
    of paths = channels; a 4D NIfTI gives one channel per volume along its last axis), ``mask``
    (path or missing), ``split`` and meta columns.

    Args:
        classes: label names, index = label value (or region names when masks are multi-channel).
        channel_names: names of the image channels, in order.
        spacing: resample image (trilinear) and mask (nearest) to this spacing in mm (MONAI).
        orientation: reorient to these axis codes, e.g. ``"RAS"`` (flips/permutations only).
        modality: default ``meta["modality"]`` when the manifest has no ``modality`` column.
    """

    task = "segmentation"

    def __init__(
        self,
        manifest: pd.DataFrame,
        *,
        root: str | Path | None = None,
        classes: Sequence[str] | None = None,
        channel_names: Sequence[str] | None = None,
        spacing: Sequence[float] | None = None,
        orientation: str | None = None,
        modality: str | None = None,
        transform: Callable[[dict], dict] | None = None,
        name: str | None = None,
        segment_map: Mapping[Any, Any] | None = None,
    ) -> None:
        if "image" not in manifest.columns:
            raise ValueError(f"{name or type(self).__name__}: manifest has no 'image' column")
        if "mask" not in manifest.columns:
            manifest = manifest.assign(mask=None)
        if spacing is not None:
            spacing = tuple(float(s) for s in spacing)
            if len(spacing) != 3 or min(spacing) <= 0:
                raise ValueError(f"{name}: spacing must be 3 positive values in mm, got {spacing}")
        if orientation is not None and len(str(orientation)) != 3:
            raise ValueError(
                f"{name}: orientation must be 3 axis codes such as 'RAS', got {orientation!r}"
            )
        super().__init__(
            manifest,
            root=root,
            path_columns=("image", "mask"),
            classes=classes,
            transform=transform,
            name=name,
        )
        self.channel_names = list(channel_names) if channel_names is not None else None
        self.segment_map = dict(segment_map) if segment_map else None  # DICOM SEG segment → class
        self.spacing = spacing
        self.orientation = orientation
        self.modality = modality

    # -- hooks for subclasses -------------------------------------------------------------------
    def read_mask(
        self, row: Mapping[str, Any], image_meta: Mapping[str, Any]
    ) -> tuple[np.ndarray, np.ndarray | None] | None:
        """The raw label map of ``row`` as stored and its affine (None when unlabelled)."""
        value = row.get("mask")
        if value is None or (isinstance(value, float) and pd.isna(value)):
            return None
        path = self.resolve(value)
        if path.name.lower().endswith(".dcm") and path.is_file():  # DICOM SEG / RTSTRUCT (or plain)
            from medimg_bench.datasets.mask_formats import place_on_grid, read_label_file

            array, meta = read_label_file(path, classes=self.classes, segment_map=self.segment_map,
                                          image_affine=image_meta.get("affine"), image_shape=image_meta["shape"])
            array, affine = place_on_grid(array, meta.get("affine"), image_meta["shape"], image_meta.get("affine"))
            meta = {**meta, "affine": affine}
        else:
            array, meta = read_volume(path)
        if array.ndim == 4 and array.shape[-1] == 1:
            array = array[..., 0]
        if array.ndim != 3:
            raise SampleError(
                f"mask must be 3D, got shape {array.shape}",
                sample_id=str(row["id"]),
                path=str(path),
            )
        return _as_label_map(array, row, path), meta.get("affine")

    def convert_mask(self, mask: np.ndarray, row: Mapping[str, Any]) -> np.ndarray:
        """Label remapping applied to the raw mask (identity here; BraTS/KiTS regions override)."""
        return mask

    def extra_meta(self, row: Mapping[str, Any], affine: np.ndarray) -> dict[str, Any]:
        """Dataset-specific meta given the final affine (VerSe centroids use it)."""
        return {}

    # -- loading --------------------------------------------------------------------------------
    def load_arrays(
        self, row: Mapping[str, Any]
    ) -> tuple[np.ndarray, np.ndarray | None, dict[str, Any]]:
        """Image ``C×X×Y×Z`` float32, mask (int64 or None) and meta before tensors are made."""
        from medimg_bench.datasets.io import affine_spacing

        sid = str(row["id"])
        if not self.pixels and self._plain_mask(row):
            return self._arrays_without_pixels(row, sid)
        value = row["image"]
        paths = [
            self.resolve(p)
            for p in (value if isinstance(value, (list, tuple, np.ndarray)) else [value])
        ]
        ref_path = paths[0]
        image, affine = self._read_channels(sid, paths)
        mask = self._mask_on_image_grid(row, sid, image, affine, ref_path)
        image, mask, affine = self._reoriented(image, mask, affine)
        if self.spacing is not None:
            image, mask, affine = resample_volume(image, mask, affine, self.spacing)
        meta = {
            **self.meta_for(row),
            "spacing": affine_spacing(affine, 3),
            "affine": affine,
            "path": str(ref_path),
        }
        meta.setdefault("modality", self.modality)
        if self.channel_names is not None:
            meta["channels"] = list(self.channel_names)
        meta.update(self.extra_meta(row, affine))
        return image, mask, meta

    def _plain_mask(self, row: Mapping[str, Any]) -> bool:
        """A label map in one file with its own grid (not a DICOM SEG placed on the image, not a
        folder of structure masks sized by the image): the grid a pixel-free sample uses."""
        value = row.get("mask")
        return (isinstance(value, str) and bool(value) and not value.lower().endswith(".dcm")
                and self.resolve(value).is_file())

    def _arrays_without_pixels(self, row: Mapping[str, Any], sid: str
                               ) -> tuple[np.ndarray, np.ndarray | None, dict[str, Any]]:
        """The model reads no pixel (stored label maps scored against label masks): the mask on its
        own grid, the image a zero placeholder of one channel on that grid (its shape and affine
        are what a label map is checked against); reoriented and resampled as a read image."""
        from medimg_bench.datasets.io import affine_spacing

        try:
            read = self.read_mask(row, {"affine": None, "shape": None})
        except Exception as exc:  # the label file is what failed: reported as [target]
            exc.stage = "target"  # type: ignore[attr-defined]
            raise
        assert read is not None
        mask, affine = read
        if affine is None or mask.ndim != 3:
            raise SampleError("a mask without an affine cannot stand for the image grid; read the image",
                              sample_id=sid, path=str(self.resolve(row["mask"])))
        mask = self.convert_mask(mask, row)
        image = np.zeros((1, *mask.shape[-3:]), dtype=np.float32)
        image, mask, affine = self._reoriented(image, mask, affine)
        if self.spacing is not None:
            image, mask, affine = resample_volume(image, mask, affine, self.spacing)
        meta = {**self.meta_for(row), "spacing": affine_spacing(affine, 3), "affine": affine,
                "path": str(self.resolve(row["mask"])), "pixels": False}
        meta.setdefault("modality", self.modality)
        meta.update(self.extra_meta(row, affine))
        return image, mask, meta

    def _read_channels(self, sid: str, paths: Sequence[Path]) -> tuple[np.ndarray, np.ndarray]:
        """The channels of ``paths`` stacked as one ``C×X×Y×Z`` float32 array, and their affine
        (every channel must share the first one's shape and affine)."""
        ref_path = paths[0]
        channels: list[np.ndarray] = []
        affine: np.ndarray | None = None
        ref_path = paths[0]
        for path in paths:
            array, meta = read_volume(path)
            if array.ndim == 3:
                parts = [array]
            elif array.ndim == 4:
                parts = [array[..., c] for c in range(array.shape[-1])]
            else:
                raise SampleError(
                    f"expected a 3D or 4D volume, got shape {array.shape}",
                    sample_id=sid,
                    path=str(path),
                )
            if affine is None:
                affine = meta["affine"]
            else:
                if parts[0].shape != channels[0].shape:
                    raise SampleError(
                        f"channel shape {parts[0].shape} differs from {channels[0].shape} of {str(ref_path)!r}",
                        sample_id=sid,
                        path=str(path),
                    )
                if not np.allclose(meta["affine"], affine, atol=1e-3):
                    raise SampleError(
                        f"channel affine differs from that of {str(ref_path)!r}",
                        sample_id=sid,
                        path=str(path),
                    )
            channels.extend(parts)
        assert affine is not None
        # one pass per channel: cast to float32 and C order (NIfTI arrays come Fortran-ordered;
        # stacking then copying to C order cost two extra passes, ~30% of a load)
        image = np.empty((len(channels), *channels[0].shape), dtype=np.float32)
        for i, c in enumerate(channels):
            image[i] = c
        return image, affine

    def _mask_on_image_grid(self, row: Mapping[str, Any], sid: str, image: np.ndarray, affine: np.ndarray,
                            ref_path: Path) -> np.ndarray | None:
        """The row's mask read onto the image's grid (the one grid rule) and converted, or None."""
        try:
            read = self.read_mask(row, {"affine": affine, "shape": image.shape[1:]})
        except Exception as exc:  # the label file is what failed: reported as [target]
            exc.stage = "target"  # type: ignore[attr-defined]
            raise
        mask = None
        if read is not None:
            mask, mask_affine = read
            mpath = self.resolve(row["mask"]) if isinstance(row.get("mask"), str) else ref_path
            if mask_affine is not None and mask.ndim == 3:
                mask = align_to_image_grid(
                    mask, mask_affine, affine, image_shape=tuple(image.shape[1:]),
                    sample_id=sid, image_path=ref_path, mask_path=mpath,
                )
            elif mask_affine is not None:
                mask = _align_mask(mask, mask_affine, affine, sid, mpath)
            if tuple(mask.shape[-3:]) != tuple(image.shape[1:]):
                raise SampleError(
                    f"image/mask shape mismatch: image {tuple(image.shape[1:])} from {str(ref_path)!r}, "
                    f"mask {tuple(mask.shape)}",
                    sample_id=sid,
                    path=str(mpath),
                )
            mask = self.convert_mask(mask, row)
        return mask

    def _reoriented(self, image: np.ndarray, mask: np.ndarray | None,
                    affine: np.ndarray) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        """Image, mask and affine in ``self.orientation`` (unchanged when it is None)."""
        from medimg_bench.datasets.io import reorient

        if self.orientation is not None:
            image_o, new_affine = reorient(np.moveaxis(image, 0, -1), affine, self.orientation)
            image = np.moveaxis(image_o, -1, 0)
            if mask is not None:
                m = mask if mask.ndim == 3 else np.moveaxis(mask, 0, -1)
                m, _ = reorient(m, affine, self.orientation)
                mask = m if mask.ndim == 3 else np.moveaxis(m, -1, 0)
            affine = new_affine
        return image, mask, affine

    def load(self, row: Mapping[str, Any]) -> dict[str, Any]:
        image, mask, meta = self.load_arrays(row)
        sample: dict[str, Any] = {
            "id": str(row["id"]),
            "image": torch.from_numpy(np.ascontiguousarray(image)),
            "meta": meta,
        }
        if mask is not None:
            sample["mask"] = torch.from_numpy(np.ascontiguousarray(mask, dtype=np.int64))
        return sample

    def slices(
        self,
        *,
        axis: int = 2,
        only_labeled: bool = False,
        step: int = 1,
        transform: Callable[[dict], dict] | None = None,
    ) -> SliceDataset:
        """A dataset of 2D slices of these volumes along spatial ``axis`` (0, 1 or 2); the volume
        transform is not applied, ``transform`` applies to each 2D slice sample."""
        return SliceDataset(
            self, axis=axis, only_labeled=only_labeled, step=step, transform=transform
        )


def _align_mask(
    mask: np.ndarray, mask_affine: np.ndarray, affine: np.ndarray, sid: str, path: Path
) -> np.ndarray:
    """Bring a mask stored with other axis flips/order onto the image grid (exact, no
    interpolation); a mask on a different grid is an error, never silently misaligned."""
    from nibabel import orientations as nio

    from medimg_bench.datasets.io import reorient

    tol = 1e-3 * max(1.0, float(np.abs(affine[:3, :3]).max()))
    if np.allclose(mask_affine, affine, atol=max(tol, 1e-3)):
        return mask
    target = "".join(nio.ornt2axcodes(nio.io_orientation(affine)))
    moved, moved_affine = reorient(mask, mask_affine, target)
    if moved.shape == mask.shape and np.allclose(moved_affine, affine, atol=max(tol, 1e-2)):
        return np.ascontiguousarray(moved)
    raise SampleError(
        "mask is not on the image grid (affines differ beyond axis flips): image origin "
        f"{np.round(affine[:3, 3], 2).tolist()}, mask origin {np.round(mask_affine[:3, 3], 2).tolist()}",
        sample_id=sid,
        path=str(path),
    )


def _as_label_map(array: np.ndarray, row: Mapping[str, Any], path: Path) -> np.ndarray:
    """The mask as C-ordered ``int64`` labels by the one mask decoder's label-map rule
    (:func:`medimg_bench.datasets.masks.check_label_map`: fractions, NaN, negatives refused)."""
    from medimg_bench.datasets.masks import check_label_map

    try:
        return np.ascontiguousarray(check_label_map(array, path))
    except ValueError as exc:
        raise SampleError(f"mask holds no label map: {exc}", sample_id=str(row["id"]), path=str(path)) from exc


class SliceDataset(ManifestDataset):
    """2D slices of a :class:`VolumeDataset`: one manifest row per (volume, slice index).

    Samples: ``image`` ``C×H×W`` (the two remaining spatial axes, in order), ``mask`` ``H×W``,
    meta ``spacing`` (2 values), ``volume_id``, ``slice_index``, ``slice_axis``, the volume's
    ``affine`` and ``patient_id`` (so patient-level splits hold for slices). Slice counts come from
    NIfTI headers (no voxel read) unless ``only_labeled`` (reads each mask once). Consecutive
    slices of one volume reuse the last volume read (a one-volume cache per worker process): keep
    the order when iterating, or group by ``volume_id`` when shuffling.
    """

    task = "segmentation"

    def __init__(
        self,
        volumes: VolumeDataset,
        *,
        axis: int = 2,
        only_labeled: bool = False,
        step: int = 1,
        transform: Callable[[dict], dict] | None = None,
    ) -> None:
        if axis not in (0, 1, 2):
            raise ValueError(f"{volumes.name}: slice axis must be 0, 1 or 2, got {axis!r}")
        if step < 1:
            raise ValueError(f"{volumes.name}: slice step must be >= 1, got {step!r}")
        if volumes.spacing is not None and not only_labeled:
            raise ValueError(
                f"{volumes.name}: slicing a resampled dataset needs the resampled shapes; pass "
                "only_labeled=True (reads every volume once) or resample offline"
            )
        self.volumes = volumes
        self.axis = axis
        self._cache: tuple[str, np.ndarray, np.ndarray | None, dict[str, Any]] | None = None
        rows = []
        for vrow in volumes.manifest.to_dict("records"):
            indices = self._slice_indices(vrow, only_labeled)[::step]
            for idx in indices:
                rows.append(
                    {
                        **vrow,
                        "id": f"{vrow['id']}_slice{int(idx):04d}",
                        "volume_id": vrow["id"],
                        "slice_index": int(idx),
                    }
                )
        manifest = pd.DataFrame(
            rows, columns=[*volumes.manifest.columns, "volume_id", "slice_index"]
        )
        super().__init__(
            manifest,
            root=volumes.root,
            path_columns=volumes.path_columns,
            classes=volumes.classes,
            transform=transform,
            name=f"{volumes.name}[slices axis {axis}]",
        )

    def _slice_indices(self, vrow: Mapping[str, Any], only_labeled: bool) -> list[int]:
        from medimg_bench.datasets.io import read_nifti_header

        if only_labeled:
            _, mask, _ = self.volumes.load_arrays(vrow)
            if mask is None:
                raise SampleError("only_labeled slices need a mask", sample_id=str(vrow["id"]))
            m = mask if mask.ndim == 3 else mask.any(axis=0)
            other = tuple(a for a in range(3) if a != self.axis)
            return np.flatnonzero(m.any(axis=other)).tolist()
        value = vrow["image"]
        first = value[0] if isinstance(value, (list, tuple, np.ndarray)) else value
        path = self.volumes.resolve(first)
        if path.is_dir():  # DICOM series: the slice count needs the files (already reoriented)
            image, _, _ = self.volumes.load_arrays(vrow)
            return list(range(int(image.shape[1 + self.axis])))
        header = read_nifti_header(path)
        shape = header["shape"][:3]
        if self.volumes.orientation is not None:
            from nibabel import orientations as nio

            transform = nio.ornt_transform(
                nio.io_orientation(header["affine"]),
                nio.axcodes2ornt(tuple(self.volumes.orientation)),
            )
            permuted = [0, 0, 0]
            for src, (dst, _) in enumerate(transform):
                permuted[int(dst)] = shape[src]
            shape = tuple(permuted)
        return list(range(int(shape[self.axis])))

    def load(self, row: Mapping[str, Any]) -> dict[str, Any]:
        vid = str(row["volume_id"])
        if self._cache is None or self._cache[0] != vid:
            vrow = {k: v for k, v in row.items() if k not in ("volume_id", "slice_index")}
            vrow["id"] = vid
            image, mask, meta = self.volumes.load_arrays(vrow)
            self._cache = (vid, image, mask, meta)
        _, image, mask, vmeta = self._cache
        idx = int(row["slice_index"])
        if idx >= image.shape[1 + self.axis]:
            raise SampleError(
                f"slice {idx} out of range for a volume of shape {image.shape[1:]}",
                sample_id=str(row["id"]),
                path=vmeta.get("path"),
            )
        img2d = np.take(image, idx, axis=1 + self.axis)
        keep = [a for a in range(3) if a != self.axis]
        meta = {
            **vmeta,
            "spacing": tuple(vmeta["spacing"][a] for a in keep),
            "volume_id": vid,
            "slice_index": idx,
            "slice_axis": self.axis,
        }
        sample: dict[str, Any] = {
            "id": str(row["id"]),
            "image": torch.from_numpy(np.ascontiguousarray(img2d)),
            "meta": meta,
        }
        if mask is not None:
            m2d = np.take(mask, idx, axis=self.axis + (mask.ndim - 3))
            sample["mask"] = torch.from_numpy(np.ascontiguousarray(m2d, dtype=np.int64))
        return sample
