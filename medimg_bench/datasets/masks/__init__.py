"""Masks and prediction maps: one decoder (:mod:`.decode`) from every stored format into a
declared encoding, with the value-domain checks every loader and the predictions reader share."""

from medimg_bench.datasets.masks.decode import (
    ENCODINGS,
    MAP_ENCODINGS,
    MASK_ENCODINGS,
    PICTURE_SUFFIXES,
    MaskDecodeError,
    Stored,
    check_label_map,
    colour_labels,
    decode_map,
    decode_map_values,
    decode_mask,
    decode_mask_values,
    grey_of,
    parse_scale,
    read_stored,
    values_seen,
)

__all__ = ["ENCODINGS", "MAP_ENCODINGS", "MASK_ENCODINGS", "PICTURE_SUFFIXES", "MaskDecodeError", "Stored", "check_label_map", "colour_labels",
           "decode_map", "decode_map_values", "decode_mask", "decode_mask_values", "grey_of", "parse_scale",
           "read_stored", "values_seen"]
