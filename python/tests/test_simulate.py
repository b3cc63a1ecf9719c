"""The simulator and the policy registry from Python."""

import pytest

import strata


def test_simulate_reports_the_simulators_fields():
    report = strata.simulate("leveled", "fillunique", entries=50_000, write_buffer_size=256 << 10)
    assert report["policy"] == "leveled"
    assert report["entries"] == 50_000
    assert report["write_amp"] >= 1.0
    assert report["flushes"] > 0 and report["compactions"] > 0


def test_simulations_are_pure_functions_of_their_arguments():
    a = strata.simulate("tiered", entries=30_000, write_buffer_size=128 << 10, seed=7)
    b = strata.simulate("tiered", entries=30_000, write_buffer_size=128 << 10, seed=7)
    # Everything but the time the policy took deciding, which is measured.
    for report in (a, b):
        assert report.pop("policy_seconds") >= 0
    assert a == b
    c = strata.simulate("tiered", entries=30_000, write_buffer_size=64 << 10, seed=7)
    assert c["flushes"] > a["flushes"]


def test_tiered_writes_less_than_leveled():
    settings = dict(entries=50_000, write_buffer_size=128 << 10)
    leveled = strata.simulate("leveled:size_ratio=4", **settings)
    tiered = strata.simulate("tiered:size_ratio=4", **settings)
    assert tiered["write_amp"] < leveled["write_amp"]


def test_bad_policies_and_workloads_are_errors_naming_them():
    with pytest.raises(strata.Error, match="no-such-policy"):
        strata.simulate("no-such-policy")
    with pytest.raises(strata.Error, match="no-such-workload"):
        strata.simulate("leveled", "no-such-workload")


def test_policies_and_workloads_are_listed_with_their_options():
    listed = {p["name"]: p for p in strata.policies()}
    assert {"leveled", "tiered", "minmax", "ecotune"} <= set(listed)
    size_ratio = [o for o in listed["leveled"]["options"] if o["name"] == "size_ratio"]
    assert size_ratio and size_ratio[0]["type"] == "float"
    names = [name for name, _ in strata.workloads()]
    assert "fillunique" in names and "mixed" in names


def test_bench_runs_the_engine_per_policy(tmp_path):
    comparison = strata.bench(["leveled", "tiered"], "mixed", entries=20_000, ops=20_000,
                              write_buffer_size=256 << 10, dir=str(tmp_path))
    runs = comparison["runs"]
    assert [r["policy"] for r in runs] == ["leveled", "tiered"]
    for r in runs:
        assert r["ops_per_sec"] > 0 and r["write_amp"] >= 1.0
    assert comparison["baseline"] == "leveled"
    pandas = pytest.importorskip("pandas")
    frame = comparison.to_pandas()
    assert isinstance(frame, pandas.DataFrame)
    assert list(frame["policy"]) == ["leveled", "tiered"]
    assert (frame["ops_per_sec"] > 0).all()
    with pytest.raises(strata.Error, match="no-such-policy"):
        strata.bench(["no-such-policy"], entries=1_000, dir=str(tmp_path))


def test_advise_ranks_candidates_and_picks_one():
    advice = strata.advise(workload="ycsb-a", entries=20_000, ops=20_000, objective="write-amp",
                           policies="leveled,tiered", size_ratios=[4, 8],
                           write_buffer_size=64 << 10)
    assert advice["pick"] is not None
    assert len(advice["candidates"]) == 4
    assert advice["pick"]["spec"].split(":")[0] in ("leveled", "tiered")
    with pytest.raises(strata.Error, match="no-such-flag"):
        strata.advise(no_such_flag=1)
