//! Tests of versions: building them by edits, the invariants edits must keep, and run lookups.

use super::*;
use crate::edit::VersionEdit;
use crate::key::KeyRange;

fn table(id: u64, lo: &str, hi: &str, size: u64) -> TableMeta {
    TableMeta::new(id, lo.to_string(), hi.to_string(), size)
}

fn two_level_version() -> Version {
    let mut edit = VersionEdit::new();
    edit.create_run(1, RunId(1))
        .add_table(1, RunId(1), table(1, "a", "c", 10))
        .add_table(1, RunId(1), table(2, "d", "f", 10));
    edit.create_run(2, RunId(2))
        .add_table(2, RunId(2), table(3, "a", "z", 100));
    Version::new().apply(&edit).unwrap()
}

#[test]
fn apply_builds_levels_and_indexes() {
    let v = two_level_version();
    assert_eq!(v.num_levels(), 3);
    assert!(v.level(0).is_empty());
    assert_eq!(v.level(1).size(), 20);
    assert_eq!(v.size(), 120);
    assert_eq!(v.table_count(), 3);
    assert_eq!(
        v.table_location(TableId(2)),
        Some(TableLocation {
            level: 1,
            run: RunId(1)
        })
    );
    assert_eq!(v.next_table_id(), 4);
    assert_eq!(v.next_run_id(), 3);
    v.check_invariants().unwrap();
}

/// A run of disjoint tables from sorted, distinct boundary keys: table i spans keys
/// 2i and 2i+1 of `bounds`, sized i + 1.
fn run_of(bounds: &[u16]) -> Run {
    let mut keys: Vec<u16> = bounds.to_vec();
    keys.sort_unstable();
    keys.dedup();
    let key = |k: u16| format!("{k:05}");
    let tables = keys
        .chunks_exact(2)
        .enumerate()
        .map(|(i, pair)| {
            Arc::new(table(
                i as u64 + 1,
                &key(pair[0]),
                &key(pair[1]),
                i as u64 + 1,
            ))
        })
        .collect();
    Run {
        id: RunId(1),
        tables,
        size: 0,
        file_bytes: 0,
        entries: 0,
    }
}

proptest::proptest! {
    #[test]
    fn overlapping_sizes_sweep_equals_one_search_per_table(
        upper in proptest::collection::vec(0u16..2000, 0..40),
        lower in proptest::collection::vec(0u16..2000, 0..80),
    ) {
        let (upper, lower) = (run_of(&upper), run_of(&lower));
        let swept = lower.overlapping_sizes(upper.tables());
        let searched: Vec<u64> = upper
            .tables()
            .iter()
            .map(|t| lower.overlapping_size(&t.key_range()))
            .collect();
        proptest::prop_assert_eq!(swept, searched);
    }
}

#[test]
fn overlapping_tables_in_a_run_are_rejected() {
    let v = two_level_version();
    let mut edit = VersionEdit::new();
    edit.add_table(1, RunId(1), table(9, "b", "b", 1));
    assert!(matches!(v.apply(&edit), Err(EditError::Overlap { .. })));
}

#[test]
fn a_table_cannot_be_in_two_places() {
    let v = two_level_version();
    let mut edit = VersionEdit::new();
    edit.create_run(0, RunId(7))
        .add_table(0, RunId(7), table(1, "a", "c", 10));
    assert_eq!(v.apply(&edit), Err(EditError::DuplicateTable(TableId(1))));
    // A move is a delete plus an add in one edit.
    let mut mv = VersionEdit::new();
    mv.delete_table(1, RunId(1), TableId(1))
        .create_run(0, RunId(7))
        .add_table(0, RunId(7), table(1, "a", "c", 10));
    let moved = v.apply(&mv).unwrap();
    assert_eq!(
        moved.table_location(TableId(1)),
        Some(TableLocation {
            level: 0,
            run: RunId(7)
        })
    );
    moved.check_invariants().unwrap();
}

#[test]
fn deleting_a_missing_table_fails_and_changes_nothing() {
    let v = two_level_version();
    let mut edit = VersionEdit::new();
    edit.delete_table(2, RunId(2), TableId(1));
    assert!(matches!(
        v.apply(&edit),
        Err(EditError::TableNotFound { .. })
    ));
    let mut twice = VersionEdit::new();
    twice
        .delete_table(1, RunId(1), TableId(1))
        .delete_table(1, RunId(1), TableId(1));
    assert_eq!(
        v.apply(&twice),
        Err(EditError::TableDeletedTwice(TableId(1)))
    );
    assert_eq!(v, two_level_version());
}

#[test]
fn emptied_runs_disappear_and_new_runs_take_the_place_of_their_inputs() {
    let v = two_level_version();
    // Put two more runs in level 2, newest first: 5, then 4, then 2.
    let mut edit = VersionEdit::new();
    edit.create_run(2, RunId(4))
        .add_table(2, RunId(4), table(4, "a", "b", 5));
    let v = v.apply(&edit).unwrap();
    let mut edit = VersionEdit::new();
    edit.create_run(2, RunId(5))
        .add_table(2, RunId(5), table(5, "a", "b", 5));
    let v = v.apply(&edit).unwrap();
    let order: Vec<u64> = v.level(2).runs().iter().map(|r| r.id().0).collect();
    assert_eq!(order, vec![5, 4, 2]);
    // Merge the two older runs (4 and 2) into a new run 6: it goes where run 4 was.
    let mut edit = VersionEdit::new();
    edit.delete_table(2, RunId(4), TableId(4))
        .delete_table(2, RunId(2), TableId(3))
        .create_run(2, RunId(6))
        .add_table(2, RunId(6), table(6, "a", "z", 100));
    let v = v.apply(&edit).unwrap();
    let order: Vec<u64> = v.level(2).runs().iter().map(|r| r.id().0).collect();
    assert_eq!(order, vec![5, 6]);
    v.check_invariants().unwrap();
}

#[test]
fn extreme_ids_and_sizes_are_errors_not_panics() {
    let mut edit = VersionEdit::new();
    edit.create_run(0, RunId(0))
        .add_table(0, RunId(0), TableMeta::new(u64::MAX, "a", "b", 1));
    assert_eq!(
        Version::new().apply(&edit),
        Err(EditError::ReservedId(u64::MAX))
    );
    let mut edit = VersionEdit::new();
    edit.create_run(0, RunId(u64::MAX))
        .add_table(0, RunId(u64::MAX), table(1, "a", "b", 1));
    assert_eq!(
        Version::new().apply(&edit),
        Err(EditError::ReservedId(u64::MAX))
    );
    // Sizes that overflow when summed saturate instead of panicking.
    let mut edit = VersionEdit::new();
    edit.create_run(0, RunId(0))
        .add_table(0, RunId(0), table(1, "a", "b", u64::MAX))
        .add_table(0, RunId(0), table(2, "c", "d", 1));
    let v = Version::new().apply(&edit).unwrap();
    assert_eq!(v.size(), u64::MAX);
    v.check_invariants().unwrap();
}

#[test]
fn an_empty_new_run_is_rejected() {
    let mut edit = VersionEdit::new();
    edit.create_run(1, RunId(1));
    assert_eq!(
        Version::new().apply(&edit),
        Err(EditError::EmptyNewRun {
            level: 1,
            run: RunId(1)
        })
    );
}

#[test]
fn overlapping_lookup_uses_key_order() {
    let v = two_level_version();
    let run = v.run(1, RunId(1)).unwrap();
    let ids = |r: &KeyRange| {
        run.overlapping(r)
            .iter()
            .map(|t| t.id.0)
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&KeyRange::new("b", "d")), vec![1, 2]);
    assert_eq!(ids(&KeyRange::new("c", "c")), vec![1]);
    assert_eq!(ids(&KeyRange::new("g", "h")), Vec::<u64>::new());
    assert_eq!(run.overlapping_size(&KeyRange::new("0", "b")), 10);
}
