//! Tests of the public report API on a synthetic three-run comparison.

use super::*;
use crate::results::LevelShape;
use std::collections::BTreeMap;

fn latency(p50: f64, p99: f64, p999: f64) -> LatencySummary {
    LatencySummary {
        count: 1000,
        mean_us: p50 * 1.2,
        p50_us: p50,
        p99_us: p99,
        p999_us: p999,
        max_us: p999 * 3.0,
    }
}

fn phase(name: &str, ops_per_sec: f64, ops: &[(&str, LatencySummary)]) -> PhaseResult {
    PhaseResult {
        name: name.into(),
        ops: 1_000_000,
        seconds: 1e6 / ops_per_sec,
        ops_per_sec,
        worst_window_ops_per_sec: ops_per_sec / 2.0,
        throughput_samples: (1..=10)
            .map(|t| (t as f64, ops_per_sec * (1.0 + 0.1 * (t % 3) as f64)))
            .collect(),
        latency: ops
            .iter()
            .map(|(op, l)| ((*op).to_owned(), l.clone()))
            .collect::<BTreeMap<_, _>>(),
        user_bytes: 116_000_000,
        write_amp: Some(3.5),
        ..PhaseResult::default()
    }
}

/// Three runs: "leveled" (the baseline, complete), "tiered" (twice the baseline's ops/s, no
/// read_amp, only runs probed) and "peer" (no samples at all, no shape, one phase, a NaN worst
/// window and no lookup cost).
fn comparison() -> Comparison {
    let leveled = RunResult {
        label: "leveled".into(),
        engine: "strata".into(),
        policy: "leveled".into(),
        workload: "ycsb-a".into(),
        ops_per_sec: 100_000.0,
        worst_window_ops_per_sec: 50_000.0,
        p99_us: 200.0,
        write_amp: 10.0,
        peak_space_amp: 1.5,
        final_space_amp: 1.1,
        read_amp: Some(1.25),
        runs_probed_per_lookup: Some(6.0),
        filter_probes_per_lookup: Some(5.0),
        stall_seconds: Some(0.5),
        cpu_seconds: 12.0,
        policy_seconds: Some(0.5),
        wall_seconds: 20.0,
        total_ops: 2_000_000,
        device_bytes_written: Some(400_000_000),
        peak_rss_bytes: Some(100 << 20),
        memory_samples: Vec::new(),
        user_bytes: 116_000_000,
        table_bytes_written: 1_160_000_000,
        live_bytes: 116_000_000,
        peak_disk_bytes: 174_000_000,
        final_disk_bytes: 127_600_000,
        disk_samples: (0..20).map(|t| (t as f64, t * 8_000_000)).collect(),
        shape: vec![
            LevelShape {
                level: 0,
                runs: 2,
                tables: 2,
                bytes: 8 << 20,
            },
            LevelShape {
                level: 1,
                runs: 1,
                tables: 30,
                bytes: 110 << 20,
            },
        ],
        policy_state: Some("{\"tuning\":\"tiering ℓ=3\"}".to_string()),
        key_index: Some((1_000_000, 10 << 20)),
        phase_blocks: Vec::new(),
        phases: vec![
            phase(
                "load",
                150_000.0,
                &[
                    ("insert", latency(3.0, 40.0, 90.0)),
                    ("all", latency(3.0, 40.0, 90.0)),
                ],
            ),
            phase(
                "run",
                100_000.0,
                &[
                    ("read", latency(6.0, 250.0, 1200.0)),
                    ("update", latency(4.0, 150.0, 700.0)),
                    ("all", latency(5.0, 200.0, 1000.0)),
                ],
            ),
        ],
        ..RunResult::default()
    };
    let tiered = RunResult {
        label: "tiered".into(),
        policy: "tiered".into(),
        ops_per_sec: 200_000.0,
        worst_window_ops_per_sec: 25_000.0,
        p99_us: 100.0,
        write_amp: 4.0,
        peak_space_amp: 3.0,
        read_amp: None,
        runs_probed_per_lookup: Some(12.0),
        filter_probes_per_lookup: Some(11.0),
        stall_seconds: None,
        phases: vec![
            phase("load", 300_000.0, &[("all", latency(2.0, 30.0, 60.0))]),
            phase(
                "run",
                200_000.0,
                &[
                    ("read", latency(8.0, 120.0, 900.0)),
                    ("all", latency(7.0, 100.0, 800.0)),
                ],
            ),
        ],
        ..leveled.clone()
    };
    let peer = RunResult {
        label: "peer".into(),
        engine: "rocksdb".into(),
        policy: "rocksdb-leveled".into(),
        ops_per_sec: 50_000.0,
        worst_window_ops_per_sec: f64::NAN,
        read_amp: None,
        runs_probed_per_lookup: None,
        filter_probes_per_lookup: None,
        disk_samples: Vec::new(),
        shape: Vec::new(),
        policy_state: None,
        key_index: None,
        phases: vec![PhaseResult {
            throughput_samples: Vec::new(),
            ..phase("run", 50_000.0, &[("all", latency(10.0, 400.0, 2000.0))])
        }],
        ..leveled.clone()
    };
    Comparison {
        workload: "ycsb-a".into(),
        description: "YCSB A: 50% reads, 50% updates, zipfian".into(),
        baseline: "leveled".into(),
        runs: vec![leveled, tiered, peer],
        device_write_bandwidth: Some(200e6),
        device_probe: None,
        failed: Vec::new(),
    }
}

/// The whitespace-separated cells of the table row that starts with `label`.
fn table_row<'a>(table: &'a str, label: &str) -> Vec<&'a str> {
    let line = table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(label));
    let Some(line) = line else {
        panic!("no row for {label} in\n{table}");
    };
    line.split_whitespace()
        .filter(|cell| *cell != "|")
        .collect()
}

#[test]
fn physical_view_sets_device_bytes_against_the_device_and_counts_cpu_per_operation() {
    let mut c = comparison();
    let table = render_table(&c);
    let physical = table
        .split_once("physical view (device sequential write: 200.0 MB/s)")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("no physical view in\n{table}"));
    // 400 MB over 20 s = 20 MB/s, 10% of 200 MB/s; no reads measured; 12 CPU s over 2,000,000
    // operations; 100 MiB.
    assert_eq!(
        table_row(physical, "leveled"),
        ["leveled", "20.0", "10.0", "-", "-", "-", "6.00", "100"]
    );
    // Reads: 100,000 device reads over 20 s = 5,000/s, 40 MB read by the process = 2.0 MB/s,
    // and with a probe 50% of the 10,000 random reads a second at queue depth 1.
    c.runs[0].device_reads = Some(100_000);
    c.runs[0].process_bytes_read = Some(40_000_000);
    c.device_probe = Some(crate::results::DeviceProbe {
        random_read_iops_qd1: 10_000.0,
        random_read_iops_qd32: 80_000.0,
        sequential_read_bytes_per_sec: 500e6,
        ..Default::default()
    });
    let table = render_table(&c);
    assert!(
        table.contains("random 4 KiB reads 10,000/s at queue depth 1 and 80,000/s at 32"),
        "{table}"
    );
    let physical = table.split_once("physical view").unwrap().1;
    assert_eq!(
        table_row(physical, "leveled"),
        ["leveled", "20.0", "10.0", "5,000", "2.0", "50.0", "6.00", "100"]
    );
    // Without a measured device or /proc readings the cells say so instead of inventing zeros.
    c.device_write_bandwidth = None;
    c.device_probe = None;
    c.runs[0].peak_rss_bytes = None;
    c.runs[0].device_bytes_written = None;
    let table = render_table(&c);
    let physical = table.split_once("device bandwidth not measured").unwrap().1;
    assert_eq!(
        table_row(physical, "leveled"),
        ["leveled", "-", "-", "5,000", "2.0", "-", "6.00", "-"]
    );
}

#[test]
fn table_shows_values_and_ratios_to_the_baseline() {
    let table = render_table(&comparison());
    assert!(table.contains("vs leveled"), "{table}");
    // run, 9 values, 5 ratios.
    let base = table_row(&table, "leveled");
    assert_eq!(base.len(), 15, "{table}");
    assert_eq!(base[1..4], ["100,000", "50,000", "5.0"]);
    assert_eq!(base[10..], ["1.00"; 5]);

    let tiered = table_row(&table, "tiered");
    // p99 from the main phase's "all" summary; read amp missing.
    assert_eq!(tiered[4], "100.0");
    assert_eq!(tiered[8], "-");
    // ops/s 2x, worst window 0.5x, p99 0.5x, WA 0.4x, peak SA 2x.
    assert_eq!(tiered[10..], ["2.00", "0.50", "0.50", "0.40", "2.00"]);

    let peer = table_row(&table, "peer");
    assert_eq!(peer[2], "-", "NaN worst window shows as missing");
    assert_eq!(peer[10..], ["0.50", "-", "2.00", "1.00", "1.00"]);
    assert!(
        table.contains("leveled: key index of 1,000,000 keys in 10.0 MiB (10.5 bytes a key)"),
        "{table}"
    );
    assert!(
        !table.contains("compaction round"),
        "no run has rounds: {table}"
    );
}

#[test]
fn table_lists_each_run_s_throughput_per_compaction_round() {
    let mut c = comparison();
    let round = |start_secs, end_secs, ops_per_sec| crate::results::RoundThroughput {
        start_secs,
        end_secs,
        ops_per_sec,
    };
    c.runs[0].phases[1].rounds = vec![round(1.0, 3.0, 60_000.0), round(3.0, 4.0, 90_000.0)];
    let table = render_table(&c);
    assert!(
        table.contains(
            "leveled run: 2 whole compaction rounds, mean 75,000 ops/s per round (60,000, 90,000)"
        ),
        "{table}"
    );
}

#[test]
fn table_columns_line_up() {
    let table = render_table(&comparison());
    // The settings come first; the main block ends at the blank line before the physical view.
    let main = table.split("\n\n").nth(1).unwrap();
    let lines: Vec<&str> = main.lines().collect();
    // Title, header, rule, three rows.
    assert_eq!(lines.len(), 6, "{table}");
    // The block separator sits in the same column on every line but the rule.
    let bar = |l: &str| l.chars().position(|c| c == '|');
    let column = bar(lines[0]);
    assert!(column.is_some());
    for line in lines.iter().skip(1).filter(|l| !l.starts_with('-')) {
        assert_eq!(bar(line), column, "{table}");
    }
}

#[test]
fn table_without_the_baseline_run_shows_no_ratios() {
    let mut c = comparison();
    c.baseline = "missing".into();
    let table = render_table(&c);
    assert!(table.contains("vs missing (no such run)"), "{table}");
    assert_eq!(table_row(&table, "tiered")[10..], ["-"; 5]);
}

#[test]
fn csv_has_a_row_per_run_phase_and_op_with_parseable_numbers() {
    let csv = render_csv(&comparison());
    let lines: Vec<&str> = csv.lines().collect();
    let header: Vec<&str> = lines[0].split(',').collect();
    // leveled: load (insert, all) + run (read, update, all); tiered: 1 + 2; peer: 1.
    assert_eq!(lines.len(), 1 + 5 + 3 + 1, "{csv}");
    let col = |name: &str| header.iter().position(|h| *h == name);
    let text_columns = ["workload", "label", "engine", "policy", "phase", "op"];
    for line in &lines[1..] {
        let fields: Vec<&str> = line.split(',').collect();
        assert_eq!(fields.len(), header.len(), "{line}");
        for (name, field) in header.iter().zip(&fields) {
            if !text_columns.contains(name) && !field.is_empty() {
                assert!(field.parse::<f64>().is_ok(), "{name} = {field:?} in {line}");
            }
        }
    }
    let (Some(label), Some(op), Some(p99), Some(read_amp), Some(worst)) = (
        col("label"),
        col("op"),
        col("p99_us"),
        col("read_amp"),
        col("run_worst_window_ops_per_sec"),
    ) else {
        panic!("missing columns in {}", lines[0]);
    };
    let row = |run: &str, operation: &str| -> Vec<&str> {
        lines[1..]
            .iter()
            .map(|l| l.split(',').collect::<Vec<_>>())
            .find(|f| f[label] == run && f[op] == operation)
            .unwrap_or_else(|| panic!("no {run}/{operation} row"))
    };
    assert_eq!(row("tiered", "read")[p99], "120");
    assert_eq!(row("leveled", "update")[read_amp], "1.25");
    assert_eq!(
        row("tiered", "all")[read_amp],
        "",
        "missing read_amp is empty"
    );
    assert_eq!(row("peer", "all")[worst], "", "NaN is empty");
}

#[test]
fn write_report_creates_every_file() -> std::io::Result<()> {
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join("not/yet/there");
    let c = comparison();
    let index = write_report(&c, &dir)?;
    assert_eq!(index, dir.join("index.html"));
    for file in [
        "index.html",
        "results.json",
        "results.csv",
        "throughput.svg",
        "disk.svg",
        "throughput-wa.svg",
        "throughput-sa.svg",
        "tradeoff.svg",
        "latency.svg",
    ] {
        let meta = std::fs::metadata(dir.join(file))?;
        assert!(meta.len() > 0, "{file} is empty");
    }
    let csv = std::fs::read_to_string(dir.join("results.csv"))?;
    assert_eq!(csv, render_csv(&c));
    Ok(())
}

#[test]
fn results_json_round_trips() -> std::io::Result<()> {
    let tmp = tempfile::tempdir()?;
    let mut c = comparison();
    // JSON has no NaN (serde_json writes null, which does not read back as f64).
    c.runs[2].worst_window_ops_per_sec = 0.0;
    write_report(&c, tmp.path())?;
    let json = std::fs::read_to_string(tmp.path().join("results.json"))?;
    assert!(json.contains("\n  "), "pretty-printed");
    let back: Comparison = serde_json::from_str(&json).map_err(std::io::Error::other)?;
    assert_eq!(back, c);
    Ok(())
}

/// Every chart's SVG text, by file name.
fn charts_of(c: &Comparison) -> std::io::Result<Vec<(&'static str, String)>> {
    charts::CHARTS
        .iter()
        .map(|chart| Ok((chart.file, (chart.render)(c, chart.title)?)))
        .collect()
}

#[test]
fn charts_name_every_run_and_their_axes() -> std::io::Result<()> {
    let c = comparison();
    let expected_titles = [
        (
            "throughput.svg",
            vec![
                "time since the main phase started (s)",
                "throughput (ops/s)",
            ],
        ),
        (
            "disk.svg",
            vec![
                "time since the run started (s)",
                "database directory size (MiB)",
            ],
        ),
        (
            "tradeoff.svg",
            vec![
                "write amplification (table bytes written ÷ user bytes)",
                "data blocks read per point lookup (* = sorted runs probed)",
            ],
        ),
        (
            "throughput-wa.svg",
            vec![
                "write amplification (table bytes written ÷ user bytes)",
                "main-phase throughput (ops/s)",
            ],
        ),
        (
            "throughput-sa.svg",
            vec![
                "peak space amplification (peak disk bytes ÷ live bytes)",
                "main-phase throughput (ops/s)",
            ],
        ),
        ("latency.svg", vec!["percentile", "latency (µs, log scale)"]),
    ];
    for (file, svg) in charts_of(&c)? {
        assert!(
            svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
            "{file}"
        );
        assert!(svg.contains("width=\"1300\""), "{file}");
        for run in &c.runs {
            assert!(svg.contains(&run.label), "{file} lacks {}", run.label);
        }
        let caption = charts::CHARTS.iter().find(|chart| chart.file == file);
        assert!(
            caption.is_some_and(|chart| svg.contains(chart.title)),
            "{file} caption"
        );
        let Some((_, titles)) = expected_titles.iter().find(|(f, _)| *f == file) else {
            panic!("unexpected chart {file}");
        };
        for title in titles {
            assert!(svg.contains(title), "{file} lacks axis title {title:?}");
        }
    }
    Ok(())
}

#[test]
fn charts_mark_missing_data_in_the_legend() -> std::io::Result<()> {
    let charts = charts_of(&comparison())?;
    let svg = |name: &str| {
        charts
            .iter()
            .find(|(f, _)| *f == name)
            .map_or("", |(_, s)| s.as_str())
    };
    assert!(svg("throughput.svg").contains("peer (no samples)"));
    assert!(svg("disk.svg").contains("peer (no samples)"));
    assert!(svg("tradeoff.svg").contains("peer (not plotted"));
    // tiered reports only runs probed, so its point carries the marker the y title explains.
    assert!(svg("tradeoff.svg").contains("tiered *"));
    for group in ["p50", "p99", "p99.9"] {
        assert!(
            svg("latency.svg").contains(&format!(">\n{group}\n<")),
            "group label {group}"
        );
    }
    Ok(())
}

#[test]
fn a_single_degenerate_run_still_draws() -> std::io::Result<()> {
    let c = Comparison {
        workload: "empty".into(),
        baseline: "alone".into(),
        runs: vec![RunResult {
            label: "alone".into(),
            ops_per_sec: f64::NAN,
            write_amp: 0.0,
            read_amp: Some(0.0),
            disk_samples: vec![(0.0, 0)],
            phases: vec![PhaseResult {
                throughput_samples: vec![(f64::NAN, 1.0), (1.0, f64::INFINITY)],
                latency: [("all".to_owned(), LatencySummary::default())].into(),
                ..PhaseResult::default()
            }],
            ..RunResult::default()
        }],
        ..Comparison::default()
    };
    let tmp = tempfile::tempdir()?;
    write_report(&c, tmp.path())?;
    for (file, svg) in charts_of(&c)? {
        assert!(svg.contains("alone"), "{file}");
        assert!(!svg.contains("NaN"), "{file} leaks NaN");
    }
    let table = render_table(&c);
    assert_eq!(table_row(&table, "alone")[1], "-");
    Ok(())
}

#[test]
fn index_html_embeds_every_chart_and_the_tables() -> std::io::Result<()> {
    let tmp = tempfile::tempdir()?;
    let c = comparison();
    let index = write_report(&c, tmp.path())?;
    let page = std::fs::read_to_string(index)?;
    for chart in &charts::CHARTS {
        assert!(
            page.contains(&format!("<img src=\"{}\"", chart.file)),
            "{}",
            chart.file
        );
    }
    assert!(page.contains(&c.description));
    assert!(page.contains("Ratios vs leveled"));
    // tiered's ops/s ratio and leveled's shape (L1: 30 tables).
    assert!(page.contains("<td class=\"num\">2.00</td>"));
    assert!(page
        .contains("<td class=\"label\">L1</td><td class=\"num\">1</td><td class=\"num\">30</td>"));
    assert!(page.contains("No shape reported."), "peer has no shape");
    assert!(
        page.contains(
            "Policy state at the end: <code>{&quot;tuning&quot;:&quot;tiering ℓ=3&quot;}</code>"
        ),
        "the policy's decisions are shown"
    );
    // Self-contained: nothing fetched from elsewhere.
    assert!(!page.contains("http://") && !page.contains("https://") && !page.contains("<script"));
    Ok(())
}

#[test]
fn an_empty_comparison_still_writes_a_report() -> std::io::Result<()> {
    let tmp = tempfile::tempdir()?;
    let index = write_report(&Comparison::default(), tmp.path())?;
    assert!(std::fs::read_to_string(index)?.contains("</html>"));
    assert_eq!(render_csv(&Comparison::default()).lines().count(), 1);
    Ok(())
}

/// The built-in policies by family, as the report groups them, and the peers.
const FAMILIES: [(&str, &[&str]); 6] = [
    (
        "classic",
        &["leveled", "leveled-full", "tiered", "lazy-leveled"],
    ),
    (
        "horizontal merges / Vertiorizon",
        &[
            "horizontal-leveled",
            "horizontal-tiered",
            "vertiorizon",
            "vertiorizon-lazy",
        ],
    ),
    ("Spooky", &["spooky", "spooky-lazy", "spooky-tiered"]),
    (
        "partial merges",
        &[
            "partial-full-p",
            "partial-rr-p",
            "partial-choosebest-p",
            "partial-mixed-p",
            "partial-full",
            "partial-rr",
            "partial-choosebest",
            "partial-mixed",
        ],
    ),
    ("EcoTune / Min-Max", &["ecotune", "minmax"]),
    ("peers", &["rocksdb", "fjall"]),
];

/// 21 policy runs and the two peers, interleaved (so grouping cannot lean on run order), with
/// throughput, WA and SA varying by run.
fn twenty_three_runs() -> Comparison {
    let template = comparison().runs[0].clone();
    let mut labels: Vec<&str> = FAMILIES
        .iter()
        .flat_map(|(_, l)| l.iter().copied())
        .collect();
    // A fixed shuffle: every seventh label, wrapping (7 and 23 are coprime).
    labels = (0..labels.len())
        .map(|i| labels[i * 7 % labels.len()])
        .collect();
    let runs = labels
        .iter()
        .enumerate()
        .map(|(i, &label)| {
            let peer = label == "rocksdb" || label == "fjall";
            let k = i as f64;
            RunResult {
                label: label.into(),
                engine: if peer { label } else { "strata" }.into(),
                policy: if peer {
                    format!("{label}-leveled")
                } else {
                    label.into()
                },
                ops_per_sec: 40_000.0 + 3_000.0 * k,
                write_amp: 2.0 + (k * 1.7) % 9.0,
                peak_space_amp: 1.1 + (k * 0.37) % 1.5,
                ..template.clone()
            }
        })
        .collect();
    Comparison {
        baseline: "leveled".into(),
        runs,
        ..comparison()
    }
}

#[test]
fn every_run_of_twenty_three_gets_its_own_colour_and_dash_everywhere() -> std::io::Result<()> {
    let c = twenty_three_runs();
    let styles = style::run_styles(&c);
    let pairs: std::collections::HashSet<_> = styles.iter().map(|s| (s.colour, s.dash)).collect();
    assert_eq!(pairs.len(), 23, "{styles:?}");
    // The table swatches draw each run in its own pair: its colour and its dash pattern in the
    // row that carries its label.
    let page = html::render_html(&c);
    for (run, style) in c.runs.iter().zip(&styles) {
        let row = page
            .lines()
            .find(|l| {
                l.contains("<tr><td class=\"label\">")
                    && l.contains(&format!("</svg>{}</td>", run.label))
            })
            .unwrap_or_else(|| panic!("no row for {}", run.label));
        assert!(
            row.contains(&format!("stroke=\"{}\"", style.hex())),
            "{row}"
        );
        assert!(
            row.contains(&format!("stroke-dasharray=\"{}\"", style.dash.dasharray())),
            "{row}"
        );
    }
    // Within a family, no two runs share a colour or a dash with their neighbour in the panel.
    for (_, runs) in style::families(&c) {
        for pair in runs.windows(2) {
            let (a, b) = (styles[pair[0]], styles[pair[1]]);
            assert!(a.colour != b.colour && a.dash != b.dash, "{a:?} {b:?}");
        }
    }
    Ok(())
}

#[test]
fn family_panels_hold_exactly_the_runs_of_their_family() -> std::io::Result<()> {
    let mut c = twenty_three_runs();
    // A policy the report does not know, with options in its label, lands in "other".
    c.runs.push(RunResult {
        label: "size-tiered:min_merge=4".into(),
        engine: "strata".into(),
        ..c.runs[0].clone()
    });
    let panels = charts::family_panels(&c);
    let titles: Vec<&str> = panels.iter().map(|(title, _)| title.as_str()).collect();
    assert_eq!(titles.len(), 7, "{titles:?}");
    for (i, (family, members)) in FAMILIES.iter().enumerate() {
        let (title, labels) = &panels[if i < 5 { i } else { 6 }];
        assert!(title.starts_with(family), "{title} for {family}");
        let mut want: Vec<&str> = members.to_vec();
        let mut got: Vec<&str> = labels.iter().map(String::as_str).collect();
        want.sort_unstable();
        got.sort_unstable();
        assert_eq!(got, want, "{title}");
    }
    assert!(panels[5].0.starts_with("other"), "{titles:?}");
    assert_eq!(panels[5].1, ["size-tiered:min_merge=4"]);
    // Both line charts draw a titled panel per family.
    let throughput = (charts::CHARTS[0].render)(&c, "t")?;
    let disk = (charts::CHARTS[1].render)(&c, "d")?;
    for (title, _) in &panels {
        assert!(throughput.contains(title.as_str()), "{title}");
        assert!(disk.contains(title.as_str()), "{title}");
    }
    Ok(())
}

/// The cells of the HTML table under `heading`, row by row: (run label, cells), each cell with
/// whether it is marked best.
fn html_table(page: &str, heading: &str) -> Vec<(String, Vec<(String, bool)>)> {
    let start = page.find(heading).unwrap_or_else(|| panic!("no {heading}"));
    let table = &page[start..];
    let table = &table[table.find("<table>").unwrap()..table.find("</table>").unwrap()];
    table
        .lines()
        .filter(|l| l.starts_with("<tr><td"))
        .map(|line| {
            let label = line
                .split("</svg>")
                .nth(1)
                .and_then(|rest| rest.split("</td>").next())
                .unwrap_or_default()
                .to_owned();
            let cells = line
                .split("<td class=\"num")
                .skip(1)
                .map(|cell| {
                    let best = cell.starts_with(" best\"");
                    let text = cell.split('>').nth(1).unwrap_or_default();
                    let text = text.trim_end_matches("</td").trim_start_matches("★ ");
                    (text.to_owned(), best)
                })
                .collect();
            (label, cells)
        })
        .collect()
}

#[test]
fn the_best_value_of_each_column_is_marked_ties_included() {
    let mut c = comparison();
    // ops/s: tiered 200,000 and peer tie once peer matches; WA: tiered lowest at 4.00; peak
    // SA: leveled and peer tie at 1.50; read amp: only leveled has one (no mark); a NaN WA
    // never wins.
    c.runs[2].ops_per_sec = 200_000.0;
    c.runs[2].write_amp = f64::NAN;
    let page = html::render_html(&c);
    assert!(
        page.contains("★ bold</span>: the best value"),
        "legend line"
    );
    let rows = html_table(&page, "<h2>Results</h2>");
    let marked = |column: usize| -> Vec<&str> {
        rows.iter()
            .filter(|(_, cells)| cells[column].1)
            .map(|(label, _)| label.as_str())
            .collect()
    };
    assert_eq!(rows.len(), 3);
    // Columns: ops/s, worst, p50, p99, p99.9, WA, peak SA, read amp, CPU s.
    assert_eq!(marked(0), ["tiered", "peer"], "ops/s tie");
    assert_eq!(
        marked(1),
        ["leveled"],
        "worst window; peer's NaN is missing"
    );
    assert_eq!(marked(2), ["leveled"], "p50");
    assert_eq!(marked(3), ["tiered"], "p99");
    assert_eq!(marked(5), ["tiered"], "WA");
    assert_eq!(rows[2].1[5], ("-".to_owned(), false), "missing WA unmarked");
    assert_eq!(marked(6), ["leveled", "peer"], "peak SA tie");
    assert!(marked(7).is_empty(), "one read amp is no contest");
    assert!(
        marked(8).is_empty(),
        "equal CPU seconds everywhere: no mark"
    );
    // The ratios mark the same runs where they have a direction.
    let ratios = html_table(&page, "<h2>Ratios");
    assert!(ratios[1].1[0].1 && ratios[2].1[0].1 && !ratios[0].1[0].1);
    // The physical view marks only columns with a direction.
    let physical = html_table(&page, "<h2>Physical view");
    assert!(physical.iter().all(|(_, cells)| !cells[0].1));
}

#[test]
fn reads_are_marked_within_their_phase() {
    let cells = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<String>>();
    let rows = [
        cells(&["load", "100"]),
        cells(&["run", "50"]),
        cells(&["load", "80"]),
        cells(&["run", "70"]),
    ];
    let refs: Vec<&[String]> = rows.iter().map(Vec::as_slice).collect();
    let better = [best::Better::Neither, best::Better::Higher];
    let marks = best::table_marks(&refs, &better, |i| refs[i][0].clone());
    let best: Vec<bool> = marks.iter().map(|m| m[1]).collect();
    assert_eq!(best, [true, false, false, true]);
}

#[test]
fn throughput_scatters_label_every_run_in_its_colour() -> std::io::Result<()> {
    let c = twenty_three_runs();
    let styles = style::run_styles(&c);
    for file in ["throughput-wa.svg", "throughput-sa.svg"] {
        let chart = charts::CHARTS.iter().find(|chart| chart.file == file);
        let Some(chart) = chart else {
            panic!("no {file}");
        };
        let svg = (chart.render)(&c, chart.title)?;
        for (run, style) in c.runs.iter().zip(&styles) {
            // Once beside its point and once in the legend.
            let text = format!(">\n{}\n<", run.label);
            assert_eq!(svg.matches(&text).count(), 2, "{file}: {}", run.label);
            // The point's label is in the run's colour (plotters writes it in capitals).
            let coloured = format!(
                "fill=\"{}\" font-weight=\"bold\"{text}",
                style.hex().to_uppercase()
            );
            assert!(svg.contains(&coloured), "{file}: {} colour", run.label);
        }
    }
    Ok(())
}

#[test]
fn runs_the_hypervisor_slowed_are_named_in_every_report() {
    let mut c = comparison();
    c.runs[0].steal_share = Some(0.24);
    c.runs[1].steal_share = Some(0.01);
    let note = "the hypervisor took 24% of this machine's CPU time during the run of leveled";
    let table = render_table(&c);
    assert!(table.contains(note), "{table}");
    assert!(
        !table.contains(&format!("the run of {}", c.runs[1].label)),
        "{table}"
    );
    // HTML escapes the apostrophe.
    let page = html::render_html(&c);
    assert!(page.contains("the hypervisor took 24%"), "{page}");
    assert!(
        page.contains("CPU time during the run of leveled"),
        "{page}"
    );
    let csv = render_csv(&c);
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let column = header.iter().position(|h| *h == "steal_share").unwrap();
    let row: Vec<&str> = csv.lines().nth(1).unwrap().split(',').collect();
    assert_eq!(row[column].parse::<f64>().unwrap(), 0.24);
}
