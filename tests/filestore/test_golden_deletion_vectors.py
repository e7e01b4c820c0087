"""The deletion-vector format (filestore/dvformat.py) against its golden vectors (tests/data/golden/
deletion_vectors.json), which the Spark jar's twin is held to as well (tests/java/GoldenDeletionVectors.java, run by
tests/tablestore/spark/test_deletion_vectors_spark.py): each case's vector read from the golden Delta DV file at its
(offset, size), its bytes as `encode_positions` writes them, and the broken vectors refused."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from filestore import dvformat

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden" / "deletion_vectors.json"
DOC: dict[str, Any] = json.loads(GOLDEN.read_text())
FILE = bytes.fromhex(DOC["file"])


def positions(ranges: list[list[int]]) -> np.ndarray:
    if not ranges:
        return np.empty(0, dtype=np.uint64)
    return np.unique(np.concatenate([np.arange(a, b, s, dtype=np.uint64) for a, b, s in ranges]))


@pytest.mark.parametrize("case", DOC["cases"], ids=lambda c: c["name"])
def test_each_golden_vector_reads_and_encodes_as_written(case: dict[str, Any]) -> None:
    expected = positions(case["ranges"])
    assert len(expected) == case["cardinality"]
    offset, size = case["offset"], case["size"]
    assert np.array_equal(dvformat.read_dv(FILE, offset, size), expected)
    assert np.array_equal(dvformat.read_dv(FILE[offset:offset + size + 8], 0, size), expected)   # a ranged read
    assert dvformat.encode_positions(expected) == FILE[offset + 4:offset + 4 + size]


def test_the_golden_file_is_the_encoder_s_file_of_the_cases() -> None:
    file, ranges = dvformat.encode_dv_file([dvformat.encode_positions(positions(c["ranges"])) for c in DOC["cases"]])
    assert file == FILE
    assert ranges == [(c["offset"], c["size"]) for c in DOC["cases"]]


@pytest.mark.parametrize("bad", DOC["bad"], ids=lambda b: b["name"])
def test_each_broken_vector_is_refused_naming_what_is_wrong(bad: dict[str, Any]) -> None:
    with pytest.raises(dvformat.DeletionVectorError, match=bad["error"]):
        dvformat.read_dv(bytes.fromhex(bad["framed"]), 0, bad["size"])
