//! Tests of Vertiorizon's back-pressure and of its `max_late_flushes` option.

use super::*;
use crate::context::PickContext;
use crate::leases::Leases;
use crate::policy::CompactionPolicy;

fn hold(policy: &Vertiorizon, shape: &str) -> Option<String> {
    let version = Version::parse(shape).unwrap();
    let (leases, stats) = (Leases::new(), WorkloadStats::default());
    policy.hold_flushes(&version, &PickContext::new(&leases, &stats))
}

/// A `vertiorizon` state at phase 1 with n = 4 whose counters read `counters` after the
/// 10th flush of the tree; the version has had `flushes` flushes.
fn state(merge: &str, counters: &str, flushes: u64) -> String {
    format!(
        "flushes {flushes}\npolicy-state {{\"phase\":1,\"n\":4,\"flushes\":0,\"merge\":\"{merge}\",\"levels\":2,\"counters\":{counters},\"ops_at_phase_start\":[0,0,0],\"tuning\":\"\",\"counted_flushes\":10}}\n"
    )
}

fn small() -> Vertiorizon {
    // n = 4 buffers of 1 MiB, T = 2, tiering with ℓ = 2.
    Vertiorizon::new()
        .with_size_ratio(2.0)
        .with_horizontal_buffers(4)
        .with_horizontal_merge(Some(HorizontalMerge::Tiering))
        .with_horizontal_levels(Some(2))
        .with_write_buffer_size(1 << 20)
}

#[test]
fn late_flushes_count_past_the_phase_or_the_due_counter_merge() {
    let late = |merge: &str, counters: &str, flushes: u64, delta: i64| {
        let version = Version::parse(&state(merge, counters, 10 + flushes)).unwrap();
        let stats = WorkloadStats::default();
        small().state(&version, &stats).unwrap().late_flushes(delta)
    };
    // Tiering: C1 = 2 falls due at the 2nd flush; the 5th is 3 late.
    assert_eq!(late("tiering", "[2,3]", 2, 0), 0);
    assert_eq!(late("tiering", "[2,3]", 5, 0), 3);
    // Past n = 4 by 3 while C1 is not yet due.
    assert_eq!(late("tiering", "[9,3]", 7, 0), 3);
    // Leveling: C1 counts up and is due once it passes C2 + δ, i.e. at 2 with C2 = 1; the
    // 3rd flush (still inside n = 4) is 1 late.
    assert_eq!(late("leveling", "[0,1]", 2, 0), 0);
    assert_eq!(late("leveling", "[0,1]", 3, 0), 1);
    // δ = 1 raises the threshold by one.
    assert_eq!(late("leveling", "[0,1]", 3, 1), 0);
}

#[test]
fn flushes_hold_while_the_horizontal_part_is_late_or_v1_is_a_phase_over() {
    // By default the limit is n = 4 late flushes.
    let policy = small();
    let phase = |flushes: u64| state("tiering", "[9,3]", 10 + flushes);
    assert_eq!(hold(&policy, &phase(7)), None, "3 past n");
    let late = hold(&policy, &phase(8)).unwrap();
    assert!(
        late.contains("(8 flushes of n=4) is 4 flushes behind its schedule, limit 4"),
        "{late}"
    );
    // A limit of 3: the counter merge due at the 2nd flush holds at the 5th.
    let policy = small().with_max_late_flushes(Some(3));
    let counter = |flushes: u64| state("tiering", "[2,3]", 10 + flushes);
    assert_eq!(hold(&policy, &counter(4)), None);
    let late = hold(&policy, &counter(5)).unwrap();
    assert!(late.contains("is 3 flushes behind"), "{late}");
    // V1 (level 9) holds n·T/√2 ≈ 5.66 MiB; the limit is that plus n·B = 9.66 MiB.
    let policy = small();
    let v1 = |size: &str| {
        format!(
            "{}L9:\n  run 1:\n    table 1 [a, z] size={size}\n",
            state("tiering", "[2,3]", 11)
        )
    };
    assert_eq!(hold(&policy, &v1("9MiB")), None);
    let over = hold(&policy, &v1("10MiB")).unwrap();
    assert!(over.starts_with("V1 holds 10MiB"), "{over}");
}

#[test]
fn max_late_flushes_parses_reports_and_rejects_what_it_cannot_use() {
    use crate::registry::{build_policy, PolicySpec};
    let option = |spec: &PolicySpec| {
        let policy = build_policy(spec).unwrap();
        let options = policy.options();
        options
            .iter()
            .find(|(name, _)| *name == "max_late_flushes")
            .map(|(_, value)| value.clone())
    };
    assert_eq!(option(&PolicySpec::new(NAME)).as_deref(), Some("phase"));
    assert_eq!(option(&PolicySpec::new(LAZY_NAME)).as_deref(), Some("36"));
    let set = PolicySpec::new(LAZY_NAME).with("max_late_flushes", "phase");
    assert_eq!(option(&set).as_deref(), Some("phase"));
    let set = PolicySpec::new(NAME).with("max_late_flushes", 8);
    assert_eq!(option(&set).as_deref(), Some("8"));
    let e = build_policy(&PolicySpec::new(LAZY_NAME).with("max_late_flushes", "soon"))
        .err()
        .unwrap();
    assert!(
        matches!(&e, PolicyError::BadOptionValue { policy, option, value, .. }
            if policy == LAZY_NAME && option == "max_late_flushes" && value == "soon"),
        "{e}"
    );
    let e = build_policy(&PolicySpec::new(NAME).with("max_late_flushes", 0))
        .err()
        .unwrap();
    assert!(
        matches!(&e, PolicyError::InvalidOption { option, .. } if *option == "max_late_flushes"),
        "{e}"
    );
}
