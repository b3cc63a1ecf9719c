//! Tests of what edits carry besides tables: the flush count and the policy handed over to.

use super::*;
use crate::edit::VersionEdit;

#[test]
fn the_flush_count_is_set_by_edits_and_kept_by_the_rest() {
    let mut flush = VersionEdit::new();
    flush
        .create_run(1, RunId(1))
        .add_table(
            1,
            RunId(1),
            TableMeta::new(1, "a".to_string(), "c".to_string(), 10),
        )
        .set_flushes(1);
    let v = Version::new().apply(&flush).unwrap();
    assert_eq!(v.flushes(), 1);
    let mut state_only = VersionEdit::new();
    state_only.set_policy_state(PolicyState::from_json("{\"c\":1}").unwrap());
    assert_eq!(v.apply(&state_only).unwrap().flushes(), 1);
    // An edit that sets only the count is not empty (a flush that wrote nothing still counts).
    let mut count_only = VersionEdit::new();
    count_only.set_flushes(2);
    assert!(!count_only.is_empty());
    assert_eq!(v.apply(&count_only).unwrap().flushes(), 2);
}

#[test]
fn a_switch_names_the_policy_and_clears_its_state_and_later_edits_keep_both() {
    let mut stateful = VersionEdit::new();
    stateful.set_policy_state(PolicyState::from_json("{\"c\":1}").unwrap());
    let v = Version::new().apply(&stateful).unwrap();
    assert_eq!(v.policy(), None);
    let mut switch = VersionEdit::new();
    switch.switch_policy("tiered:size_ratio=4");
    assert!(!switch.is_empty());
    let v = v.apply(&switch).unwrap();
    assert_eq!(v.policy(), Some("tiered:size_ratio=4"));
    assert!(
        v.policy_state().is_empty(),
        "the old policy's state is not the new one's"
    );
    assert!(v.in_handover());
    let mut flush = VersionEdit::new();
    flush.set_flushes(3);
    let v = v.apply(&flush).unwrap();
    assert_eq!(v.policy(), Some("tiered:size_ratio=4"));
    assert!(v.in_handover());
    assert_eq!(Version::parse(&v.to_string()).unwrap(), v);
    let mut end = VersionEdit::new();
    end.end_handover();
    let v = v.apply(&end).unwrap();
    assert!(!v.in_handover());
    assert_eq!(v.policy(), Some("tiered:size_ratio=4"));
    let json = serde_json::to_string(&flush).unwrap();
    assert!(!json.contains("policy\""), "{json}");
}

#[test]
fn edits_written_before_the_count_existed_read_as_no_change() {
    // A manifest record of an older build has no "flushes" field.
    let old = r#"{"deleted":[],"new_runs":[],"added":[],"policy_state":null}"#;
    let edit: VersionEdit = serde_json::from_str(old).unwrap();
    assert_eq!(edit.flushes, None);
    let json = serde_json::to_string(&VersionEdit::new()).unwrap();
    assert!(!json.contains("flushes"), "{json}");
}
