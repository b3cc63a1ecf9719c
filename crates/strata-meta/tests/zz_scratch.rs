use strata_meta::*;
#[test]
fn hex_utf8() {
    let r =
        std::panic::catch_unwind(|| Version::parse("L0:\n run 0:\n  table 1 [0x€a, b] size=1\n"));
    println!("hex_utf8 {:?}", r.map(|x| x.map(|v| v.to_string())));
}
#[test]
fn id_max() {
    let r = std::panic::catch_unwind(|| {
        Version::parse("L0:\n run 0:\n  table 18446744073709551615 [a, b] size=1\n")
    });
    println!("id_max {:?}", r.map(|x| x.map(|v| v.to_string())));
}
#[test]
fn run_max() {
    let r = std::panic::catch_unwind(|| {
        Version::parse("L0:\n run 18446744073709551615:\n  table 1 [a, b] size=1\n")
    });
    println!("run_max {:?}", r.map(|x| x.map(|v| v.to_string())));
}
#[test]
fn apply_max() {
    let r = std::panic::catch_unwind(|| {
        let mut e = VersionEdit::new();
        e.create_run(0, RunId(0))
            .add_table(0, RunId(0), TableMeta::new(u64::MAX, "a", "b", 1));
        Version::new()
            .apply(&e)
            .map(|v| (v.check_invariants(), v.to_string()))
    });
    println!("apply_max {:?}", r);
}
#[test]
fn ws_state() {
    let mut e = VersionEdit::new();
    e.set_policy_state(PolicyState::from_json(" {} ").unwrap());
    let v = Version::new().apply(&e).unwrap();
    let p = Version::parse(&v.to_string()).unwrap();
    println!(
        "ws_state eq={} {:?} {:?}",
        p == v,
        v.to_string(),
        p.to_string()
    );
}
