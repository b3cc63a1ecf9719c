//! Workload files: the examples in `examples/workloads/` load, unknown keys are refused by name
//! with their line and column, and bad values are refused naming their key.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::path::PathBuf;
use strata_workload::{KeyDist, PresetParams, WorkloadSpec};

fn examples() -> Vec<(PathBuf, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/workloads");
    let mut files: Vec<(PathBuf, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .collect();
    files.sort();
    files
}

/// A one-phase workload with `phase` added to the phase table.
fn phase(phase: &str) -> String {
    format!("name = \"w\"\n[[phases]]\nname = \"p\"\n{phase}\n")
}

fn error(text: &str) -> String {
    WorkloadSpec::from_toml(text).unwrap_err()
}

#[test]
fn every_example_file_loads_and_validates() {
    let files = examples();
    assert!(files.len() >= 7, "{files:?}");
    for (path, text) in &files {
        let spec = WorkloadSpec::from_toml(text).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        assert_eq!(
            spec.name,
            path.file_stem().unwrap().to_str().unwrap(),
            "{path:?}: the name matches the file"
        );
    }
}

#[test]
fn the_examples_cover_every_documented_key() {
    let all: String = examples().into_iter().map(|(_, t)| t).collect();
    for key in [
        "name",
        "description",
        "key_size",
        "value_size",
        "policies",
        "policy_options",
        "ops",
        "duration_secs",
        "threads",
        "mix",
        "keys",
        "inserts",
        "scan_length",
        "long_scan_length",
        "random_scan_length",
        "measured",
        "open_loop",
        "writer",
        "background_writer",
        "read_batch",
        "insert",
        "update",
        "read",
        "scan",
        "long_scan",
        "delete",
        "rmw",
        "theta",
        "period_ops",
        "window",
        "size",
        "domain",
        "sigma",
        "period_inserts",
        "warehouses",
        "queries_per_sec",
        "mib_per_sec",
    ] {
        assert!(
            all.contains(&format!("{key} =")) || all.contains(&format!("{key}]")),
            "no example sets `{key}`"
        );
    }
    for kind in [
        "uniform",
        "zipfian",
        "latest",
        "shifting-zipfian",
        "random",
        "sequential",
        "nearly-sorted",
        "uniform-domain",
        "shifting-normal",
        "tpcc-new-order",
    ] {
        assert!(
            all.contains(&format!("kind = \"{kind}\"")),
            "no example uses {kind}"
        );
    }
}

#[test]
fn a_misspelled_key_in_an_example_is_named_with_line_and_column() {
    let (path, text) = examples()
        .into_iter()
        .find(|(p, _)| p.ends_with("basics.toml"))
        .unwrap();
    let line = text.lines().position(|l| l.starts_with("threads")).unwrap() + 1;
    let broken = text.replacen("threads = 1", "thread = 1", 1);
    let e = error(&broken);
    assert!(
        e.starts_with(&format!("line {line}, column 1 (`thread = 1")),
        "{path:?}: {e}"
    );
    assert!(
        e.contains("unknown field `thread`") && e.contains("`threads`"),
        "{e}"
    );
}

#[test]
fn unknown_keys_are_refused_everywhere_with_their_position() {
    for (text, key, line, column) in [
        (phase("ops = 1\nmix = { insert = 1.0, writ = 3.0 }"), "writ", 5, 23),
        (phase("ops = 1\nthread = 8\nmix = { insert = 1.0 }"), "thread", 5, 1),
        (format!("nme = \"x\"\n{}", phase("ops = 1\nmix = { insert = 1.0 }")), "nme", 1, 1),
        (phase("ops = 1\nmix = { insert = 1.0 }\nkeys = { kind = \"zipfian\", thta = 1.0 }"), "thta", 6, 8),
        // Keys beside a kind without fields, which serde would accept silently.
        (phase("ops = 1\nmix = { insert = 1.0 }\nkeys = { kind = \"uniform\", theta = 0.5 }"), "theta", 6, 8),
        (phase("ops = 1\nmix = { insert = 1.0 }\ninserts = { kind = \"random\", size = 3 }"), "size", 6, 11),
        (phase("ops = 1\nmix = { insert = 1.0 }\nopen_loop = { qps = 3.0 }"), "qps", 6, 15),
        (phase("ops = 1\nmix = { insert = 1.0 }\nwriter = { mib_per_sec = 1.0, mix = { update = 1.0 }, rate = 2 }"), "rate", 6, 55),
        (phase("ops = 1\nmix = { insert = 1.0 }\nbackground_writer = { updat = 1.0 }"), "updat", 6, 23),
    ] {
        let e = error(&text);
        assert!(
            e.starts_with(&format!("line {line}, column {column} ")),
            "{key}: {e}"
        );
        assert!(e.contains(&format!("unknown field `{key}`")), "{e}");
    }
}

#[test]
fn bad_values_are_refused_naming_their_key() {
    for (body, expected) in [
        ("ops = 1\nmix = { insert = -1.0, read = 2.0 }", "mix.insert is -1"),
        ("ops = 1\nmix = { insert = nan }", "mix.insert is NaN"),
        ("ops = 1\nmix = { read = inf }", "mix.read is inf"),
        ("ops = 1\nmix = { insert = 0.0 }", "mix has no operation with a positive weight"),
        ("ops = 1\nmix = {}", "mix has no operation with a positive weight"),
        ("ops = 1\nduration_secs = -3.0\nmix = { insert = 1.0 }", "duration_secs is -3"),
        ("ops = 1\nduration_secs = inf\nmix = { insert = 1.0 }", "duration_secs is inf"),
        ("mix = { insert = 1.0 }", "has neither ops nor duration_secs"),
        ("ops = 1\nthreads = 0\nmix = { insert = 1.0 }", "threads is 0"),
        ("ops = 1\nthreads = 100000\nmix = { insert = 1.0 }", "threads is 100000"),
        ("ops = 1\nmix = { scan = 1.0 }\nscan_length = 0", "scan_length is 0"),
        ("ops = 1\nmix = { long_scan = 1.0 }\nlong_scan_length = 0", "long_scan_length is 0"),
        ("ops = 1\nmix = { read = 1.0 }\nkeys = { kind = \"zipfian\", theta = -1.0 }", "keys.theta is -1"),
        ("ops = 1\nmix = { read = 1.0 }\nkeys = { kind = \"shifting-zipfian\", theta = 1.0, period_ops = 0 }", "keys.period_ops is 0"),
        ("ops = 1\nmix = { insert = 1.0 }\ninserts = { kind = \"nearly-sorted\", window = 0 }", "inserts.window is 0"),
        ("ops = 1\nmix = { insert = 1.0 }\ninserts = { kind = \"uniform-domain\", size = 0 }", "inserts.size is 0"),
        ("ops = 1\nmix = { insert = 1.0 }\ninserts = { kind = \"shifting-normal\", domain = 9, sigma = 0.0, period_inserts = 1 }", "inserts.sigma is 0"),
        ("ops = 1\nmix = { insert = 1.0 }\ninserts = { kind = \"tpcc-new-order\", warehouses = 0 }", "inserts.warehouses is 0"),
        ("ops = 1\nmix = { read = 1.0 }\nopen_loop = { queries_per_sec = 0.0 }", "open_loop.queries_per_sec is 0"),
        ("ops = 1\nmix = { read = 1.0 }\nwriter = { mib_per_sec = -4.0, mix = { update = 1.0 } }", "writer.mib_per_sec is -4"),
        ("ops = 1\nmix = { read = 1.0 }\nwriter = { mib_per_sec = 4.0, mix = { update = -1.0 } }", "writer.mix.update is -1"),
        ("ops = 1\nmix = { read = 1.0 }\nbackground_writer = {}", "background_writer has no operation"),
        ("ops = 1\nmix = { read = 1.0 }\nread_batch = 0", "read_batch is 0"),
        ("ops = 1\nmix = { read = 1.0 }\nread_batch = 5000", "read_batch is 5000"),
        ("ops = 1\nmix = { update = 1.0 }\nread_batch = 8", "no point reads"),
        ("ops = 1\nmix = { read = 1.0 }\nread_batch = 8\nopen_loop = { queries_per_sec = 10.0 }", "open_loop"),
    ] {
        let e = error(&phase(body));
        assert!(e.starts_with("phase \"p\": ") && e.contains(expected), "{body}: {e}");
    }
    // Values of the wrong type or sign are found by the parser: the line names the key.
    let e = error(&phase("ops = -3\nmix = { insert = 1.0 }"));
    assert!(
        e.starts_with("line 4, column 7 (`ops = -3`): invalid value"),
        "{e}"
    );
    let e = error(&phase("ops = 1\nmix = { insert = \"lots\" }"));
    assert!(
        e.contains("line 5, column 18") && e.contains("expected f64"),
        "{e}"
    );
    let e = error(
        "name = \"w\"\nkey_size = -16\n[[phases]]\nname = \"p\"\nops = 1\nmix = { insert = 1.0 }\n",
    );
    assert!(e.starts_with("line 2, column 12 (`key_size = -16`)"), "{e}");
    // Keys below 8 bytes hold the key number's low bytes, so the insert order needs a domain that
    // fits.
    let short = |inserts: &str| {
        format!("name = \"w\"\nkey_size = 4\n[[phases]]\nname = \"p\"\nops = 1\nmix = {{ insert = 1.0 }}\n{inserts}")
    };
    let e = error(&short(""));
    assert!(
        e.contains("key_size 4 holds key numbers below 2^32") && e.contains("spread over 64 bits"),
        "{e}"
    );
    let e = error(&short(
        "inserts = { kind = \"uniform-unique\", domain = 4294967297 }\n",
    ));
    assert!(e.contains("draws keys below 4294967297"), "{e}");
    WorkloadSpec::from_toml(&short(
        "inserts = { kind = \"uniform-unique\", domain = 4294967296 }\n",
    ))
    .unwrap();
    assert!(error(
        "name = \"w\"\nkey_size = 0\n[[phases]]\nname = \"p\"\nops = 1\nmix = { insert = 1.0 }\n"
    )
    .contains("key_size 0"));
    assert!(error("name = \"w\"\nphases = []\n").contains("at least one phase"));
    assert!(error("name = \"w\"\n").contains("missing field `phases`"));
    assert!(error(&format!(
        "policies = [\" \"]\n{}",
        phase("ops = 1\nmix = { insert = 1.0 }")
    ))
    .contains("policies[0] is empty"));
}

#[test]
fn a_key_beside_a_kind_without_fields_says_so() {
    let e = error(&phase(
        "ops = 1\nmix = { read = 1.0 }\nkeys = { kind = \"uniform\", theta = 0.5 }",
    ));
    assert!(
        e.ends_with("unknown field `theta`: this kind takes no other keys"),
        "{e}"
    );
}

#[test]
fn a_kind_without_extra_keys_still_loads() {
    let w = WorkloadSpec::from_toml(&phase(
        "ops = 1\nmix = { read = 1.0 }\nkeys = { kind = \"uniform\" }\ninserts = { kind = \"sequential\" }",
    ))
    .unwrap();
    assert_eq!(w.phases[0].keys, KeyDist::Uniform);
}

#[test]
fn preset_parameters_are_checked_and_named() {
    let ok = PresetParams::default();
    assert!(ok.validate().is_ok());
    for (params, param) in [
        (
            PresetParams {
                entries: 0,
                ..ok.clone()
            },
            "entries",
        ),
        (
            PresetParams {
                ops: 0,
                ..ok.clone()
            },
            "ops",
        ),
        (
            PresetParams {
                key_size: 0,
                ..ok.clone()
            },
            "key_size",
        ),
        (
            PresetParams {
                threads: 0,
                ..ok.clone()
            },
            "threads",
        ),
        (
            PresetParams {
                theta: f64::NAN,
                ..ok.clone()
            },
            "theta",
        ),
        (
            PresetParams {
                theta: 0.0,
                ..ok.clone()
            },
            "theta",
        ),
        (
            PresetParams {
                write_rate_mib: -1.0,
                ..ok.clone()
            },
            "write_rate_mib",
        ),
        (
            PresetParams {
                query_rate: 0.0,
                ..ok.clone()
            },
            "query_rate",
        ),
        (
            PresetParams {
                long_scan_share: 1.5,
                ..ok.clone()
            },
            "long_scan_share",
        ),
        (
            PresetParams {
                hot_period_ops: 0,
                ..ok.clone()
            },
            "hot_period_ops",
        ),
        (
            PresetParams {
                disorder: 0,
                ..ok.clone()
            },
            "disorder",
        ),
        (
            PresetParams {
                distribution: Some("zipf".into()),
                ..ok.clone()
            },
            "distribution",
        ),
    ] {
        assert_eq!(params.validate().unwrap_err().param, param);
        // The preset names the parameter, not a phase field it would have broken.
        let e = WorkloadSpec::preset("fillunique", &params).unwrap_err();
        assert!(e.starts_with(param), "{e}");
    }
}
