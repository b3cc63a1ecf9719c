"""The engine from Python: round trips, batches, iterators both ways, snapshots, errors."""

import threading

import pytest

import strata


@pytest.fixture
def db(tmp_path):
    with strata.Db(str(tmp_path / "db"), policy="leveled", write_buffer_size=64 << 10) as db:
        yield db


def test_put_get_delete_round_trip(db):
    db.put(b"a", b"1")
    db.put("b", "2")  # str is stored as UTF-8
    db.put(bytearray(b"c"), b"3")
    assert db.get(b"a") == b"1"
    assert db.get(b"b") == b"2"
    assert db.get("c") == b"3"
    assert db.get(b"missing") is None
    db.delete(b"a")
    assert db.get(b"a") is None
    assert db.multi_get([b"a", b"b", b"zz"]) == [None, b"2", None]


def test_values_survive_flushes_compactions_and_a_reopen(tmp_path):
    path = str(tmp_path / "db")
    with strata.Db(path, policy="tiered", write_buffer_size=32 << 10) as db:
        for i in range(5000):
            db.put(b"key%06d" % i, b"value%d" % i)
        db.flush()
        db.compact_range()
        metrics = db.metrics()
        assert metrics["user_bytes"] > 0
        assert metrics["flush_bytes"] > 0
        assert db.policy().startswith("tiered")
    with strata.Db(path) as db:
        assert db.get(b"key004321") == b"value4321"
        # A database keeps the policy it was created with.
        assert db.policy().startswith("tiered")


def test_a_row_cache_answers_a_key_read_again(tmp_path):
    path = str(tmp_path / "db")
    with strata.Db(path, write_buffer_size=32 << 10, row_cache_capacity=1 << 20) as db:
        for i in range(2000):
            db.put(b"key%06d" % i, b"value%d" % i)
        db.flush()
        for _ in range(2):
            assert db.get(b"key000042") == b"value42"
        metrics = db.metrics()
        assert metrics["row_cache_capacity"] == 1 << 20
        assert metrics["row_cache_hits"] >= 1
        db.put(b"key000042", b"new")
        assert db.get(b"key000042") == b"new"


def test_batches_are_atomic_and_reusable(db):
    batch = strata.WriteBatch()
    batch.put(b"x", b"1")
    batch.put(b"y", b"2")
    batch.delete(b"x")
    assert len(batch) == 3
    db.write(batch)
    assert db.get(b"x") is None and db.get(b"y") == b"2"
    for key in (b"k1", b"k2", b"k3", b"k4"):
        db.put(key, b"v")
    ranged = strata.WriteBatch()
    ranged.delete_range(b"k2", b"k4")
    db.write(ranged, sync=True)
    assert [k for k, _ in db.range(b"k", b"l")] == [b"k1", b"k4"]


def test_iterators_both_ways_with_bounds(db):
    for i in range(100):
        db.put(b"k%03d" % i, b"v%d" % i)
    forward = list(db.range(b"k010", b"k020"))
    assert forward == [(b"k%03d" % i, b"v%d" % i) for i in range(10, 20)]
    backward = list(db.range_rev(b"k010", b"k020"))
    assert backward == forward[::-1]
    assert len(list(db.range())) == 100
    assert next(db.range_rev())[0] == b"k099"


def test_a_snapshot_does_not_see_later_writes(db):
    db.put(b"k", b"old")
    snap = db.snapshot()
    db.put(b"k", b"new")
    db.put(b"later", b"x")
    assert db.get(b"k", snapshot=snap) == b"old"
    assert db.get(b"k") == b"new"
    assert [k for k, _ in db.range(snapshot=snap)] == [b"k"]
    assert snap.sequence > 0


def test_errors_carry_the_engines_message(tmp_path, db):
    with pytest.raises(strata.Error, match="no-such-policy"):
        strata.Db(str(tmp_path / "other"), policy="no-such-policy")
    with pytest.raises(strata.Error, match="snappy"):
        strata.Db(str(tmp_path / "other"), compression="snappy")
    with pytest.raises(strata.Error):
        db.delete_range(b"z", b"a")  # end before start
    with pytest.raises(TypeError):
        db.put(1, b"v")
    # A second handle on an open database is refused (the lock), naming the path.
    with pytest.raises(strata.Error):
        strata.Db(db.__repr__().split('"')[1])


def test_a_closed_database_refuses_calls(tmp_path):
    db = strata.Db(str(tmp_path / "db"))
    db.put(b"k", b"v")
    db.close()
    db.close()  # twice is fine
    with pytest.raises(strata.Error, match="closed"):
        db.get(b"k")
    assert "closed" in repr(db)


def test_threads_write_and_read_at_once(db):
    def writer(t):
        for i in range(2000):
            db.put(b"t%d-%05d" % (t, i), b"v")

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(list(db.range())) == 8000
