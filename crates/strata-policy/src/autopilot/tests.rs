use super::*;

/// An advisor the tests never ask: they hand predictions to `Pilot::decide` directly.
struct Unused;

impl Advisor for Unused {
    fn name(&self) -> &str {
        "unused"
    }

    fn predict(&self, _: &AdviceRequest<'_>) -> Result<Vec<Prediction>, String> {
        Err("not asked".to_string())
    }
}

fn pilot() -> Pilot {
    Pilot::new(AutopilotOptions::new(Arc::new(Unused)))
}

fn window(ops: u64) -> WorkloadWindow {
    WorkloadWindow {
        puts: ops / 2,
        point_reads: ops - ops / 2,
        key_bytes: 16 * (ops / 2),
        value_bytes: 100 * (ops / 2),
        seconds: 10.0,
        ..WorkloadWindow::default()
    }
}

fn prediction(spec: &str, ns_per_op: f64, handover_bytes: u64) -> Prediction {
    Prediction {
        spec: spec.to_string(),
        ns_per_op,
        handover_bytes,
        // 5 ns per byte rewritten.
        handover_ns: 5.0 * handover_bytes as f64,
    }
}

/// Decides at `now` on a window of a million operations where `best` costs `best_ns` and the
/// current `leveled` 1,000 ns.
fn step(p: &mut Pilot, now: f64, best: &str, best_ns: f64, bytes: u64) -> Decision {
    p.decide(
        now,
        &window(1_000_000),
        "leveled",
        Ok(vec![
            prediction("leveled", 1000.0, 0),
            prediction(best, best_ns, bytes),
            prediction("minmax", 2000.0, 0),
        ]),
    )
}

#[test]
fn keeps_the_current_policy_when_it_is_predicted_best() {
    let mut p = pilot();
    let d = p.decide(
        0.0,
        &window(1_000_000),
        "leveled",
        Ok(vec![
            prediction("tiered", 1200.0, 0),
            prediction("leveled", 900.0, 0),
        ]),
    );
    assert_eq!(d.action, Action::Keep);
    assert_eq!(d.candidates[0].spec, "leveled");
    assert!(d.reason.contains("predicted best"), "{}", d.reason);
}

#[test]
fn switches_after_the_confirmations_only() {
    let mut p = pilot();
    let first = step(&mut p, 0.0, "tiered", 700.0, 1 << 20);
    assert_eq!(first.action, Action::Keep);
    assert!(first.reason.contains("in a row"), "{}", first.reason);
    let second = step(&mut p, 30.0, "tiered", 700.0, 1 << 20);
    assert_eq!(
        second.action,
        Action::Switch {
            to: "tiered".to_string()
        }
    );
    // Best first, the current one kept.
    let specs: Vec<&str> = second.candidates.iter().map(|c| c.spec.as_str()).collect();
    assert_eq!(specs, ["tiered", "leveled", "minmax"]);
}

#[test]
fn a_small_gain_never_switches() {
    let mut p = pilot();
    for i in 0..10 {
        let d = step(&mut p, 30.0 * i as f64, "tiered", 950.0, 0);
        assert_eq!(d.action, Action::Keep);
        assert!(d.reason.contains("worth a switch"), "{}", d.reason);
    }
}

#[test]
fn a_handover_dearer_than_the_gain_never_switches() {
    let mut p = pilot();
    // 300 ns × 4 windows of 10^6 ops = 1.2 s saved; 1 GiB handover = 5.4 s.
    for i in 0..5 {
        let d = step(&mut p, 30.0 * i as f64, "tiered", 700.0, 1 << 30);
        assert_eq!(d.action, Action::Keep);
        // Weighed once confirmed.
        let expected = if i == 0 { "in a row" } else { "handover" };
        assert!(d.reason.contains(expected), "{}", d.reason);
    }
}

#[test]
fn alternating_winners_never_switch() {
    let mut p = pilot();
    for i in 0..10 {
        let best = if i % 2 == 0 { "tiered" } else { "spooky" };
        let d = step(&mut p, 30.0 * i as f64, best, 600.0, 0);
        assert_eq!(d.action, Action::Keep, "decision {i}: {}", d.reason);
    }
}

#[test]
fn switches_are_spaced_and_budgeted() {
    let options = AutopilotOptions::new(Arc::new(Unused))
        .with_confirmations(1)
        .with_min_seconds_between_switches(100.0)
        .with_handover_bytes_per_hour(3 << 20);
    let mut p = Pilot::new(options);
    let mb = 1 << 20;
    assert!(matches!(
        step(&mut p, 0.0, "tiered", 500.0, mb).action,
        Action::Switch { .. }
    ));
    let soon = step(&mut p, 50.0, "spooky", 500.0, mb);
    assert_eq!(soon.action, Action::Keep);
    assert!(soon.reason.contains("last switch"), "{}", soon.reason);
    assert!(matches!(
        step(&mut p, 150.0, "spooky", 500.0, mb).action,
        Action::Switch { .. }
    ));
    // 2 MiB spent this hour; 2 more would pass the 3 MiB budget.
    let over = step(&mut p, 300.0, "tiered", 500.0, 2 * mb);
    assert_eq!(over.action, Action::Keep);
    assert!(over.reason.contains("budget"), "{}", over.reason);
    // An hour after the first switch its bytes no longer count.
    assert!(matches!(
        step(&mut p, 3601.0, "tiered", 500.0, 2 * mb).action,
        Action::Switch { .. }
    ));
}

#[test]
fn an_advisor_error_or_a_missing_current_policy_keeps_it() {
    let mut p = pilot();
    let d = p.decide(
        0.0,
        &window(100),
        "leveled",
        Err("no calibration".to_string()),
    );
    assert_eq!(d.action, Action::Keep);
    assert!(d.reason.contains("no calibration"));
    let d = p.decide(
        0.0,
        &window(100),
        "leveled",
        Ok(vec![prediction("tiered", 1.0, 0)]),
    );
    assert_eq!(d.action, Action::Keep);
    assert!(d.reason.contains("did not predict the current"));
}

#[test]
fn a_window_is_due_by_bytes_or_time_once_it_has_enough_operations() {
    let o = AutopilotOptions::new(Arc::new(Unused))
        .with_every_bytes(1000)
        .with_every_seconds(10.0)
        .with_min_window_ops(5);
    assert!(!o.window_is_due(5000, 4, 100.0));
    assert!(o.window_is_due(1000, 5, 0.0));
    assert!(o.window_is_due(0, 5, 10.0));
    assert!(!o.window_is_due(999, 5, 9.9));
}

#[test]
fn decisions_round_trip_through_json() {
    let mut p = pilot();
    step(&mut p, 0.0, "tiered", 700.0, 10);
    let d = step(&mut p, 30.0, "tiered", 700.0, 10);
    let text = serde_json::to_string(&d).unwrap();
    assert_eq!(serde_json::from_str::<Decision>(&text).unwrap(), d);
    assert!(
        d.summary().starts_with("switch leveled -> tiered"),
        "{}",
        d.summary()
    );
}

#[test]
fn a_costly_advice_lengthens_the_next_window() {
    /// Takes 20 ms to say nothing.
    struct Slow;
    impl Advisor for Slow {
        fn name(&self) -> &str {
            "slow"
        }
        fn predict(&self, _: &AdviceRequest<'_>) -> Result<Vec<Prediction>, String> {
            std::thread::sleep(std::time::Duration::from_millis(20));
            Err("slow".to_string())
        }
    }
    let options = AutopilotOptions::new(Arc::new(Slow))
        .with_every_seconds(0.1)
        .with_min_window_ops(1)
        .with_max_advice_share(0.1);
    let mut p = Pilot::new(options);
    assert!(p.window_is_due(0, 10, 0.1));
    let version = strata_meta::Version::new();
    let request = AdviceRequest {
        window: &window(10),
        current: "leveled",
        version: &version,
        live_bytes: 0,
        write_buffer_size: 1 << 20,
        key_size: 16,
        value_size: 100,
    };
    let d = p.advise_and_decide(0.0, &request);
    assert!(d.advice_seconds >= 0.02);
    // At most a tenth of the time: the next window lasts at least ten times the advice.
    assert!(!p.window_is_due(0, 10, 0.1));
    assert!(p.window_is_due(0, 10, 10.0 * d.advice_seconds));
}

#[test]
fn near_equal_candidates_trading_first_place_still_switch() {
    let mut p = pilot();
    // Both 35-40% faster than the current policy in both windows; the first place changes.
    let mut decide = |now: f64, tiered: f64, spooky: f64| {
        p.decide(
            now,
            &window(1_000_000),
            "leveled",
            Ok(vec![
                prediction("leveled", 1000.0, 0),
                prediction("tiered", tiered, 0),
                prediction("spooky", spooky, 0),
            ]),
        )
    };
    assert_eq!(decide(0.0, 600.0, 650.0).action, Action::Keep);
    assert_eq!(
        decide(30.0, 650.0, 600.0).action,
        Action::Switch {
            to: "spooky".to_string()
        }
    );
}

#[test]
fn the_window_after_an_unconfirmed_candidate_closes_on_the_schedule_alone() {
    let options = AutopilotOptions::new(Arc::new(Unused))
        .with_every_seconds(1.0)
        .with_min_window_ops(1)
        .with_confirmations(3);
    let mut p = Pilot::new(options);
    // An advice of 2 s: a window lasts 40 s at the 5% share.
    p.last_advice_seconds = 2.0;
    assert!(!p.window_is_due(0, 10, 1.0));
    let first = step(&mut p, 0.0, "tiered", 700.0, 0);
    assert!(first.reason.contains("in a row"), "{}", first.reason);
    // Waiting for confirmation: the next window closes after the schedule's second.
    assert!(p.window_is_due(0, 10, 1.0));
    // Still unconfirmed after it, but never two short windows in a row.
    let second = step(&mut p, 1.0, "tiered", 700.0, 0);
    assert!(second.reason.contains("(2 so far)"), "{}", second.reason);
    assert!(!p.window_is_due(0, 10, 1.0));
    assert!(p.window_is_due(0, 10, 40.0));
    // The third decision switches; the window after a switch is long again.
    let third = step(&mut p, 41.0, "tiered", 700.0, 0);
    assert!(
        matches!(third.action, Action::Switch { .. }),
        "{}",
        third.reason
    );
    assert!(!p.window_is_due(0, 10, 1.0));
    // A decision that finds nothing worth a switch ends a confirmation window too.
    let mut p = Pilot::new(
        AutopilotOptions::new(Arc::new(Unused))
            .with_every_seconds(1.0)
            .with_min_window_ops(1),
    );
    p.last_advice_seconds = 2.0;
    step(&mut p, 0.0, "tiered", 700.0, 0);
    assert!(p.window_is_due(0, 10, 1.0));
    step(&mut p, 1.0, "tiered", 990.0, 0);
    assert!(!p.window_is_due(0, 10, 1.0));
}
