"""Policies written in Python: registered by name, run by the simulator and the engine, decision
for decision what the same design built in decides, and bad plans refused by name."""

import pytest

import strata


class PyTiered(strata.Policy):
    """The built-in ``tiered`` (crates/strata-policy/src/builtin/tiered.rs), in Python: flushes
    go to a new run in level 1; a level holding T runs merges whole into a new run below."""

    name = "py-tiered"
    summary = "tiered, written in Python"
    options = {"size_ratio": 10.0, "target_file_size": 64 << 20, "bloom_bits_per_key": 10.0}

    def output(self, level):
        return strata.PlanOutput(
            level=level,
            target_file_size=self.target_file_size,
            bloom_bits_per_key=self.bloom_bits_per_key,
        )

    def plan_flush(self, version, ctx):
        return strata.FlushPlan(self.output(1), reason="new run in L1")

    def pick(self, version, ctx):
        limit = max(round(self.size_ratio), 2)
        for level in range(1, version.num_levels):
            runs = version.runs(level)
            held = any(ctx.is_leased(t.id) for run in runs for t in run.tables)
            if len(runs) < limit or held:
                continue
            return strata.Plan(
                "merge",
                strata.whole_runs(version, level),
                self.output(level + 1),
                reason="L%d holds %d runs (limit %d)" % (level, len(runs), limit),
            )
        return None


class Broken(strata.Policy):
    """Merges a table that does not exist."""

    name = "py-broken"

    def plan_flush(self, version, ctx):
        return strata.FlushPlan(strata.PlanOutput(level=1))

    def pick(self, version, ctx):
        if len(version.runs(1)) < 2:
            return None
        return strata.Plan("merge", [strata.PlanInput(1, 999, [12345])], strata.PlanOutput(2))


strata.register_policy(PyTiered)
strata.register_policy(Broken)


def without_timing(report):
    """The report without what is measured rather than decided, or names the policy."""
    for key in ("policy_seconds", "policy", "policy_options"):
        report.pop(key)
    return report


@pytest.mark.parametrize("workload", ["fillunique", "updaterandom", "mixed"])
def test_a_python_policy_decides_as_the_built_in_one(workload):
    settings = dict(entries=40_000, ops=40_000, write_buffer_size=64 << 10)
    options = "size_ratio=3,target_file_size=262144,bloom_bits_per_key=10"
    built_in = strata.simulate("tiered:" + options, workload, **settings)
    in_python = strata.simulate("py-tiered:" + options, workload, **settings)
    assert in_python["policy"] == "py-tiered"
    assert in_python["compactions"] > 10
    # Same flushes, compactions, bytes, runs over time: the same decisions, one by one.
    assert without_timing(in_python) == without_timing(built_in)


def test_a_python_policy_lists_and_takes_its_options():
    listed = {p["name"]: p for p in strata.policies()}
    options = {o["name"]: o for o in listed["py-tiered"]["options"]}
    assert options["size_ratio"]["type"] == "float"
    assert options["target_file_size"]["type"] == "integer"
    with pytest.raises(strata.Error, match="no_such_option"):
        strata.simulate("py-tiered:no_such_option=1", entries=1000)
    with pytest.raises(strata.Error, match="py-tiered"):
        strata.register_policy(PyTiered)  # the name is taken


def test_a_bad_plan_is_an_error_naming_the_rule():
    with pytest.raises(strata.Error, match="12345|999"):
        strata.simulate("py-broken", entries=20_000, write_buffer_size=16 << 10)


def test_the_engine_runs_a_python_policy(tmp_path):
    with strata.Db(str(tmp_path / "db"), policy="py-tiered:size_ratio=3,target_file_size=65536",
                   write_buffer_size=32 << 10) as db:
        for i in range(20_000):
            db.put(b"k%06d" % (i * 7919 % 20_000), b"v%d" % i)
        db.flush()
        db.wait_for_compactions()
        assert db.policy().startswith("py-tiered")
        assert "L2" in db.version() or "L3" in db.version()
        assert db.get(b"k000007") is not None
        assert len(list(db.range())) == 20_000


class Counting(strata.Policy):
    """Counts its flushes in its policy state, and records what it read back each time."""

    name = "py-counting"
    seen = []

    def plan_flush(self, version, ctx):
        import json

        state = json.loads(version.policy_state) if version.policy_state else {"flushes": 0}
        Counting.seen.append(state["flushes"])
        return strata.FlushPlan(strata.PlanOutput(level=1),
                                policy_state=json.dumps({"flushes": state["flushes"] + 1}))


strata.register_policy(Counting)


def test_a_python_policys_state_travels_in_its_plans_and_comes_back_in_the_version():
    Counting.seen.clear()
    report = strata.simulate("py-counting", entries=20_000, write_buffer_size=64 << 10)
    assert report["flushes"] > 5
    # Each flush read the count the previous one installed. (The simulator asks once more
    # than it flushes, first, and installs nothing of that answer: the reads start 0, 0, 1.)
    assert Counting.seen[-report["flushes"]:] == list(range(report["flushes"]))


class Looking(strata.Policy):
    """Tiered, which also records the tables and blocks it was shown."""

    name = "py-looking"
    shown = []

    def plan_flush(self, version, ctx):
        return strata.FlushPlan(strata.PlanOutput(level=1, target_file_size=64 << 10))

    def pick(self, version, ctx):
        for run in version.runs(1):
            for table in run.tables:
                Looking.shown.append(table)
        return PyTiered(size_ratio=3, target_file_size=64 << 10,
                        bloom_bits_per_key=10.0).pick(version, ctx)


strata.register_policy(Looking)


def test_a_python_policy_sees_tables_and_their_blocks():
    Looking.shown.clear()
    strata.simulate("py-looking", entries=20_000, write_buffer_size=64 << 10)
    assert Looking.shown
    table = Looking.shown[-1]
    assert table.smallest <= table.largest and table.size > 0 and table.entries > 0
    assert table.blocks is None  # no block size: tables are not cut into blocks
    Looking.shown.clear()
    strata.simulate("py-looking", entries=20_000, write_buffer_size=64 << 10, block_size=4096)
    table = Looking.shown[-1]
    blocks = table.blocks
    assert len(blocks) > 1
    assert sum(b["entries"] for b in blocks) == table.entries
    assert blocks[0]["smallest"] == table.smallest and blocks[-1]["largest"] == table.largest
    assert all(b["file"] == table.id for b in blocks)
