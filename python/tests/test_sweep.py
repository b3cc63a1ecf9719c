"""Sweeps: grid points, serial runs, and a Dask LocalCluster of 2 workers giving the same rows."""

import pytest

import strata
from strata.sweep import points

GRID = {
    "policy": ["leveled", "tiered"],
    "size_ratio": [3, 6],
    "write_buffer_size": [64 << 10, 128 << 10],
}


def test_points_are_the_grids_product_in_order():
    got = points(GRID)
    assert len(got) == 8
    assert got[0] == {"policy": "leveled", "size_ratio": 3, "write_buffer_size": 64 << 10}
    assert got[1]["write_buffer_size"] == 128 << 10  # the last key varies fastest
    assert got[-1] == {"policy": "tiered", "size_ratio": 6, "write_buffer_size": 128 << 10}
    with pytest.raises(ValueError, match="policy"):
        points({"size_ratio": [3]})


def test_a_serial_sweep_applies_options_and_settings():
    rows = strata.sweep(GRID, "fillunique", entries=20_000, serial=True)
    assert [r["policy"] for r in rows] == [p["policy"] for p in points(GRID)]
    by = {(r["policy"], r["size_ratio"], r["write_buffer_size"]): r for r in rows}
    # A larger buffer flushes less often; a larger ratio merges less in tiering.
    assert by["leveled", 3, 128 << 10]["flushes"] < by["leveled", 3, 64 << 10]["flushes"]
    assert by["tiered", 6, 64 << 10]["write_amp"] < by["tiered", 3, 64 << 10]["write_amp"]
    # The same point alone gives the same row.
    alone = strata.simulate("tiered:size_ratio=6", entries=20_000, write_buffer_size=64 << 10)
    assert by["tiered", 6, 64 << 10]["write_amp"] == alone["write_amp"]


def test_a_dask_sweep_on_two_workers_equals_the_serial_one():
    pytest.importorskip("dask.distributed")
    serial = strata.sweep(GRID, "fillunique", entries=20_000, serial=True)
    on_dask = strata.sweep(GRID, "fillunique", entries=20_000, workers=2)
    assert on_dask == serial


def test_reports_and_rows_as_data_frames():
    pandas = pytest.importorskip("pandas")
    report = strata.simulate("leveled", entries=20_000, write_buffer_size=64 << 10)
    timeline = report.to_pandas()
    assert isinstance(timeline, pandas.DataFrame)
    assert len(timeline) == report["flushes"]
    assert list(report.phases_to_pandas()["name"])
    rows = strata.sweep({"policy": ["leveled", "tiered"]}, entries=10_000, serial=True)
    frame = rows.to_pandas()
    assert list(frame["policy"]) == ["leveled", "tiered"]
    assert (frame["write_amp"] >= 1).all()
