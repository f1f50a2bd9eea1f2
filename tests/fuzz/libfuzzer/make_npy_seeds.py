#!/usr/bin/env python3
"""Seed corpus for the .npy libFuzzer target, written by NumPy itself: float32 and float64, 1-D and
2-D, empty and not, format 1.0 and 2.0, and a few files the reader must refuse (Fortran order,
big-endian, int64, 3-D). Usage: make_npy_seeds.py DIR"""
import io
import pathlib
import sys

import numpy as np

out = pathlib.Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
arrays = {
    "f8_2x3": np.arange(6, dtype="<f8").reshape(2, 3) / 3,
    "f4_2x3": np.arange(6, dtype="<f4").reshape(2, 3) / 3,
    "f8_7": np.linspace(-1, 1, 7),
    "f4_1x1": np.array([[np.nan]], dtype="<f4"),
    "f8_0x3": np.zeros((0, 3)),
    "f8_fortran": np.asfortranarray(np.ones((2, 3))),
    "f8_big_endian": np.ones((2, 2), dtype=">f8"),
    "i8_2x2": np.ones((2, 2), dtype="<i8"),
    "f8_3d": np.ones((2, 1, 2)),
}
for name, a in arrays.items():
    for version in ((1, 0), (2, 0)):
        buf = io.BytesIO()
        np.lib.format.write_array(buf, a, version=version)
        (out / f"{name}_v{version[0]}.npy").write_bytes(buf.getvalue())
print(f"{2 * len(arrays)} seed files in {out}")
