//! Block references between tables: reference counts, retained files and their sizes follow
//! from the edits alone, dangling references are refused, and the text form carries them.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::sync::Arc;
use strata_meta::{
    BlockMeta, Bytes, EditError, FileReferences, RunId, TableId, TableMeta, Version, VersionEdit,
};

fn block(lo: &str, hi: &str, file: u64, offset: u64, size: u64) -> BlockMeta {
    BlockMeta {
        smallest: Bytes::copy_from_slice(lo.as_bytes()),
        largest: Bytes::copy_from_slice(hi.as_bytes()),
        size,
        entries: 10,
        file: TableId(file),
        offset,
    }
}

/// A table of blocks `blocks` whose size is their sum plus `own_extra` bytes of its own file
/// (index, footer).
fn table(id: u64, blocks: Vec<BlockMeta>, own_extra: u64) -> TableMeta {
    let size = blocks.iter().map(|b| b.size).sum::<u64>() + own_extra;
    let mut t = TableMeta::new(
        id,
        blocks[0].smallest.clone(),
        blocks[blocks.len() - 1].largest.clone(),
        size,
    );
    t.blocks = Some(blocks.into());
    t
}

const RUN: RunId = RunId(1);

/// L1 holding table 1 (blocks [a,b] [c,d] [e,f] of 100 bytes each, 50 bytes of metadata).
fn base() -> Version {
    let mut edit = VersionEdit::new();
    edit.create_run(1, RUN).add_table(
        1,
        RUN,
        table(
            1,
            vec![
                block("a", "b", 1, 0, 100),
                block("c", "d", 1, 100, 100),
                block("e", "f", 1, 200, 100),
            ],
            50,
        ),
    );
    Version::new().apply(&edit).unwrap()
}

/// Table 2: block [a,b] rewritten into its own file, block [c,d] kept in file 1.
fn merged_table() -> TableMeta {
    table(
        2,
        vec![block("a", "b", 2, 0, 90), block("c", "d", 1, 100, 100)],
        40,
    )
}

/// [`base`] after a merge replaced table 1 with [`merged_table`].
fn after_merge() -> Version {
    let mut edit = VersionEdit::new();
    edit.delete_table(1, RUN, TableId(1))
        .add_table(1, RUN, merged_table());
    base().apply(&edit).unwrap()
}

#[test]
fn a_deleted_tables_file_is_retained_while_referenced_and_released_with_the_last_reference() {
    assert_eq!(base().disk_bytes(), 350);
    // A merge replaces table 1 with table 2, which rewrites [a,b] and keeps [c,d] in file 1.
    let t2 = merged_table();
    assert_eq!(t2.file_bytes(), 130);
    assert_eq!(t2.blocks_written(), 1);
    assert_eq!(t2.blocks_referenced(), 1);
    let v = after_merge();
    assert_eq!(
        v.retained_files().collect::<Vec<_>>(),
        vec![(TableId(1), 350)]
    );
    assert_eq!(
        v.file_references(TableId(1)),
        Some(FileReferences {
            tables: 1,
            bytes: 100
        })
    );
    assert!(v.needs_file(TableId(1)) && v.needs_file(TableId(2)));
    // Size counts the referenced block once; the disk holds all of file 1 and table 2's own.
    assert_eq!(v.size(), 230);
    assert_eq!(v.disk_bytes(), 350 + 130);
    // Of file 1's 350 bytes, table 2 refers to 100.
    assert_eq!(v.retained_dead_bytes(), 250);
    v.check_invariants().unwrap();

    // The text form carries the retained file and reads back equal.
    let text = v.to_string();
    assert!(text.contains("retained 1 size=350"), "{text}");
    assert_eq!(Version::parse(&text).unwrap(), v);

    // A second merge keeps the reference alive through a new table (a chain of moves).
    let t3 = table(3, vec![block("c", "d", 1, 100, 100)], 30);
    let mut edit = VersionEdit::new();
    edit.delete_table(1, RUN, TableId(2)).add_table(1, RUN, t3);
    let v = v.apply(&edit).unwrap();
    assert_eq!(
        v.retained_files().collect::<Vec<_>>(),
        vec![(TableId(1), 350)]
    );
    assert!(!v.needs_file(TableId(2)));
    assert_eq!(v.retained_dead_bytes(), 250);

    // Deleting the last referring table releases file 1.
    let mut edit = VersionEdit::new();
    edit.delete_table(1, RUN, TableId(3));
    let v = v.apply(&edit).unwrap();
    assert_eq!(v.retained_files().count(), 0);
    assert!(!v.needs_file(TableId(1)));
    assert_eq!(v.disk_bytes(), 0);
    assert_eq!(v.retained_dead_bytes(), 0);
}

#[test]
fn moving_a_table_keeps_its_file_and_its_references() {
    let v = after_merge();
    let mut edit = VersionEdit::new();
    edit.delete_table(1, RUN, TableId(2))
        .create_run(2, RunId(2))
        .add_table(2, RunId(2), merged_table());
    let v = v.apply(&edit).unwrap();
    assert_eq!(
        v.retained_files().collect::<Vec<_>>(),
        vec![(TableId(1), 350)]
    );
    assert!(v.needs_file(TableId(2)));
    v.check_invariants().unwrap();
}

#[test]
fn a_reference_to_a_file_the_version_does_not_keep_is_refused() {
    // File 9 never held a table of the version.
    let t2 = table(2, vec![block("x", "y", 9, 0, 100)], 40);
    let mut edit = VersionEdit::new();
    edit.add_table(1, RUN, t2);
    assert_eq!(
        base().apply(&edit).unwrap_err(),
        EditError::DanglingReference {
            table: TableId(2),
            file: TableId(9)
        }
    );
    // A retained file no table refers to is refused too.
    let mut edit = VersionEdit::new();
    edit.retain_file(TableId(5), 100);
    assert_eq!(
        base().apply(&edit).unwrap_err(),
        EditError::UnreferencedRetainedFile(TableId(5))
    );
    // And so is a table referring to more bytes than it holds.
    let mut t = table(3, vec![block("x", "y", 1, 0, 100)], 0);
    t.size = 10;
    let mut edit = VersionEdit::new();
    edit.add_table(1, RUN, t);
    assert!(matches!(
        base().apply(&edit).unwrap_err(),
        EditError::InvalidTable(_)
    ));
}

#[test]
fn a_snapshot_edit_lists_retained_files_and_rebuilds_the_same_version() {
    let v = after_merge();
    let mut snapshot = VersionEdit::new();
    snapshot
        .create_run(1, RUN)
        .add_table(1, RUN, Arc::new(merged_table()))
        .retain_file(TableId(1), 350);
    let rebuilt = Version::new().apply(&snapshot).unwrap();
    assert_eq!(
        rebuilt.retained_files().collect::<Vec<_>>(),
        vec![(TableId(1), 350)]
    );
    assert_eq!(rebuilt.disk_bytes(), v.disk_bytes());
    // Without the retained file the snapshot leaves a dangling reference.
    snapshot.retained.clear();
    assert!(matches!(
        Version::new().apply(&snapshot).unwrap_err(),
        EditError::DanglingReference { .. }
    ));
}

#[test]
fn blocks_written_and_preserved_are_counted_per_level_and_moves_count_nothing() {
    let t2 = table(
        2,
        vec![block("a", "b", 2, 0, 90), block("c", "d", 1, 100, 100)],
        40,
    );
    let mut edit = VersionEdit::new();
    edit.delete_table(1, RUN, TableId(1))
        .add_table(2, RUN, t2.clone());
    let (mut written, mut preserved) = (Vec::new(), Vec::new());
    edit.count_blocks(&mut written, &mut preserved);
    assert_eq!((written, preserved), (vec![0, 0, 1], vec![0, 0, 1]));
    let mut moved = VersionEdit::new();
    moved.delete_table(2, RUN, TableId(2)).add_table(3, RUN, t2);
    let (mut written, mut preserved) = (Vec::new(), Vec::new());
    moved.count_blocks(&mut written, &mut preserved);
    assert!(written.is_empty() && preserved.is_empty());
}
