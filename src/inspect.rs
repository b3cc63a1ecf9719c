//! `strata inspect`: a database directory, a table file or a WAL file, as text or JSON
//! ([`strata_engine::inspect`] reads them).

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use strata_engine::fs::{FileSystem, StdFs};
use strata_engine::inspect::{
    inspect_db, inspect_table, inspect_wal, DamageReport, DbInspection, InspectDb, TableInspection,
    WalInspection,
};
use strata_policy::autopilot::Action;
use strata_sim::human_bytes as format_size;

/// Decisions to keep the policy `strata inspect` prints (the last ones); switches are all printed.
const SHOWN_KEEPS: usize = 5;

/// Options of `strata inspect`.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct InspectArgs {
    #[command(subcommand)]
    file: Option<InspectFile>,
    /// The database directory: levels, runs, tables, sizes, the policy's state, WALs, and
    /// files missing, damaged or left over.
    dir: Option<PathBuf>,
    /// List every table of every run.
    #[arg(long)]
    tables: bool,
    /// Summarize every record of the manifest (RocksDB: `ldb manifest_dump`).
    #[arg(long)]
    history: bool,
    /// Open every table file and check every block's checksum and contents.
    #[arg(long)]
    verify: bool,
    /// Read every live key (a read-only open) to measure space amplification.
    #[arg(long)]
    scan: bool,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
}

/// A single file to inspect.
#[derive(Subcommand, Debug)]
enum InspectFile {
    /// A table file (`<n>.sst`): properties, layout, index, Bloom filter, checksums (RocksDB:
    /// `sst_dump`).
    Table {
        /// The table file.
        file: PathBuf,
        /// Also list the first N entries (default 100 with --dump alone).
        #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "100")]
        dump: Option<usize>,
        /// Skip reading and checking every block.
        #[arg(long)]
        no_verify: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// A write-ahead log (`<n>.log`): records, sequence numbers, a torn tail (RocksDB: `ldb
    /// dump_wal`).
    Wal {
        /// The WAL file.
        file: PathBuf,
        /// List every record.
        #[arg(long)]
        records: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `strata inspect`. Damage is printed with the rest, then returned as the error, so the
/// exit status says whether the files are sound.
pub fn run(args: InspectArgs) -> Result<()> {
    let fs: Arc<dyn FileSystem> = Arc::new(StdFs);
    match args.file {
        Some(InspectFile::Table {
            file,
            dump,
            no_verify,
            json,
        }) => {
            exists(&file)?;
            let table = inspect_table(fs, &file, !no_verify, dump.unwrap_or(0))?;
            print(json || args.json, &table, table_text)?;
            damaged(table.damage.as_slice())
        }
        Some(InspectFile::Wal {
            file,
            records,
            json,
        }) => {
            exists(&file)?;
            let wal = inspect_wal(fs.as_ref(), &file, records)?;
            print(json || args.json, &wal, wal_text)?;
            damaged(wal.damage.as_slice())
        }
        None => {
            let Some(dir) = args.dir else {
                bail!("inspect needs a database directory, or `table FILE` or `wal FILE`");
            };
            if !dir.is_dir() {
                bail!("{} is not a directory", dir.display());
            }
            let what = InspectDb {
                history: args.history,
                verify: args.verify,
                scan: args.scan,
            };
            let db = inspect_db(fs, &dir, what)?;
            print(args.json, &db, |d| db_text(d, args.tables))?;
            damaged(&db.damage)
        }
    }
}

fn exists(file: &Path) -> Result<()> {
    if !file.is_file() {
        bail!("{} is not a file", file.display());
    }
    Ok(())
}

fn print<T: serde::Serialize>(json: bool, value: &T, text: impl Fn(&T) -> String) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(value)?);
    } else {
        print!("{}", text(value));
    }
    Ok(())
}

/// The first damage as the command's error.
fn damaged(damage: &[DamageReport]) -> Result<()> {
    match damage {
        [] => Ok(()),
        [d, rest @ ..] => bail!(
            "{} is damaged at offset {}: {}{}",
            d.file,
            d.offset,
            d.reason,
            match rest.len() {
                0 => String::new(),
                n => format!(" (and {n} more damaged files, listed above)"),
            }
        ),
    }
}

fn db_text(d: &DbInspection, tables: bool) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "manifest    {} ({}, {} records){}",
        d.manifest,
        format_size(d.manifest_bytes),
        d.manifest_records,
        d.manifest_torn_tail
            .as_ref()
            .map(|t| format!("; torn tail dropped at {t}"))
            .unwrap_or_default()
    );
    let _ = writeln!(
        s,
        "sequence    last {}, next file {}, log number {}, {} flushes",
        d.last_seqno, d.next_file_number, d.log_number, d.flushes
    );
    let _ = writeln!(
        s,
        "policy      {}{}; state {}",
        d.policy.as_deref().unwrap_or("(none recorded)"),
        if d.in_handover {
            " (handover under way)"
        } else {
            ""
        },
        d.policy_state
    );
    if d.keyspaces.len() > 1 {
        // The lines above and below are the default keyspace's tree; the others in brief.
        for k in &d.keyspaces {
            let options: Vec<String> = k.options.iter().map(|(o, v)| format!("{o}={v}")).collect();
            let _ = writeln!(
                s,
                "keyspace    {} (number {}): {} runs, {} tables, {}; log number {}; policy {}{}",
                k.name,
                k.id,
                k.runs,
                k.tables,
                format_size(k.table_bytes),
                k.log_number,
                k.policy.as_deref().unwrap_or("(none recorded)"),
                if options.is_empty() {
                    String::new()
                } else {
                    format!("; {}", options.join(", "))
                }
            );
        }
    }
    let l = &d.lifetime;
    let per_op = |bytes: u64, ops: u64| bytes as f64 / ops.max(1) as f64;
    let _ = writeln!(
        s,
        "workload    {} puts, {} deletes, {} point reads, {} scans since creation; keys {:.1} B, \
         values {:.1} B on average; skew {}",
        l.puts,
        l.deletes,
        l.point_reads,
        l.scans,
        per_op(l.key_bytes, l.puts + l.deletes),
        per_op(l.value_bytes, l.puts),
        l.skew.map_or("unknown".to_string(), |a| format!("{a:.3}"))
    );
    let _ = writeln!(
        s,
        "written     {} by users, {} by flushes, {} by compactions: write amplification {}",
        format_size(l.user_bytes()),
        format_size(l.flush_bytes),
        format_size(l.compaction_bytes_written),
        l.write_amplification()
            .map_or("unknown".to_string(), |wa| format!("{wa:.2}"))
    );
    let _ = writeln!(
        s,
        "tables      {} in {} runs, {} ({} in files kept for referred blocks); {} entries, {} \
         tombstones",
        d.tables,
        d.runs,
        format_size(d.table_bytes),
        format_size(d.retained_bytes),
        d.entries,
        d.tombstones
    );
    if let Some(live) = &d.live {
        let _ = writeln!(
            s,
            "live data   {} keys, {}: space amplification {:.3}",
            live.keys,
            format_size(live.bytes),
            live.space_amplification
        );
    }
    let _ = writeln!(
        s,
        "\n{:<6} {:>5} {:>7} {:>12} {:>12} {:>11}",
        "level", "runs", "tables", "bytes", "entries", "tombstones"
    );
    for l in &d.levels {
        let count = |f: fn(&strata_engine::inspect::RunInspection) -> u64| -> u64 {
            l.runs.iter().map(f).sum()
        };
        let _ = writeln!(
            s,
            "{:<6} {:>5} {:>7} {:>12} {:>12} {:>11}",
            format!("L{}", l.level),
            l.runs.len(),
            l.runs.iter().map(|r| r.tables.len()).sum::<usize>(),
            format_size(l.bytes),
            count(|r| r.entries),
            count(|r| r.tombstones)
        );
        if tables {
            for r in &l.runs {
                let _ = writeln!(
                    s,
                    "  run {}: {} tables, {}",
                    r.id,
                    r.tables.len(),
                    format_size(r.bytes)
                );
                for t in &r.tables {
                    let _ = writeln!(
                        s,
                        "    {:06}.sst {:>10} {:>9} entries {:>7} tombstones  seq {}..{}  [{} .. {}]",
                        t.id,
                        format_size(t.bytes),
                        t.entries,
                        t.tombstones,
                        t.seqnos.0,
                        t.seqnos.1,
                        t.smallest,
                        t.largest
                    );
                }
            }
        }
    }
    let _ = writeln!(s);
    if d.wals.is_empty() {
        let _ = writeln!(s, "WALs        none");
    }
    for w in &d.wals {
        let _ = writeln!(
            s,
            "WAL         {:06}.log {}{}",
            w.number,
            format_size(w.bytes),
            if w.replayed {
                " (replayed at open)"
            } else {
                " (obsolete)"
            }
        );
    }
    for l in &d.leftovers {
        let _ = writeln!(s, "leftover    {l} (the next open deletes it)");
    }
    for e in &d.history {
        let _ = writeln!(
            s,
            "edit @{:<8} {}+{} tables ({}) -{} tables, {} new runs, levels {:?}{}{}{}",
            e.offset,
            if e.snapshot { "snapshot " } else { "" },
            e.added,
            format_size(e.added_bytes),
            e.deleted,
            e.new_runs,
            e.levels,
            if e.policy_state { ", policy state" } else { "" },
            e.last_seqno
                .map(|n| format!(", last seqno {n}"))
                .unwrap_or_default(),
            e.log_number
                .map(|n| format!(", log number {n}"))
                .unwrap_or_default()
        );
        if let Some(p) = &e.policy {
            let _ = writeln!(s, "            switch to {p}");
        }
        if let Some(a) = &e.autopilot {
            let _ = writeln!(s, "            autopilot: {}", a.summary());
            for c in &a.candidates {
                let _ = writeln!(
                    s,
                    "              {:<40} {:>9.0} ns/op, handover {}",
                    c.spec,
                    c.ns_per_op,
                    format_size(c.handover_bytes)
                );
            }
        }
    }
    // Every switch, and the last few decisions to keep: a database re-advised for days
    // records thousands (`--json` and `--history` give them all).
    let keeps = d
        .autopilot
        .iter()
        .filter(|a| a.action == Action::Keep)
        .count();
    let mut keeps_left = keeps;
    for a in &d.autopilot {
        if a.action == Action::Keep {
            keeps_left -= 1;
            if keeps_left >= SHOWN_KEEPS {
                continue;
            }
        }
        let _ = writeln!(s, "autopilot   at {:.0} s: {}", a.at_seconds, a.summary());
    }
    if keeps > SHOWN_KEEPS {
        let _ = writeln!(
            s,
            "autopilot   ({} earlier decisions to keep the policy not shown)",
            keeps - SHOWN_KEEPS
        );
    }
    for damage in &d.damage {
        let _ = writeln!(s, "DAMAGED     {damage}");
    }
    if d.verified {
        let _ = writeln!(s, "verified    every table's blocks read and checked");
    }
    s
}

fn table_text(t: &TableInspection) -> String {
    let mut s = String::new();
    let p = &t.properties;
    let _ = writeln!(
        s,
        "table       {} ({}), format version {}",
        t.file,
        format_size(t.bytes),
        t.layout.format_version
    );
    let _ = writeln!(
        s,
        "entries     {} ({} tombstones), sequence numbers {}..{}",
        p.entries, p.tombstones, p.seqnos.0, p.seqnos.1
    );
    let _ = writeln!(s, "keys        [{} .. {}]", p.smallest, p.largest);
    let _ = writeln!(
        s,
        "raw bytes   keys {}, values {}; compression {}",
        format_size(p.raw_key_bytes),
        format_size(p.raw_value_bytes),
        p.compression
    );
    let l = &t.layout;
    let _ = writeln!(
        s,
        "blocks      {} data; index @{} ({}), properties @{} ({})",
        p.data_blocks,
        l.index.offset,
        format_size(l.index.size),
        l.properties.offset,
        format_size(l.properties.size)
    );
    match (l.filter, l.filter_probes, l.filter_bits_set, l.filter_bits) {
        (Some(f), Some(probes), Some(set), Some(bits)) if bits > 0 => {
            let fill = set as f64 / bits as f64;
            let _ = writeln!(
                s,
                "bloom       @{} ({}), {} bits per key, {} probes, {:.1}% of bits set: \
                 estimated false-positive rate {:.4}",
                f.offset,
                format_size(f.size),
                p.bloom_bits_per_key,
                probes,
                100.0 * fill,
                fill.powi(probes as i32)
            );
        }
        _ => {
            let _ = writeln!(s, "bloom       none");
        }
    }
    let _ = writeln!(
        s,
        "\n{:>10} {:>9} {:>8}  last key",
        "offset", "bytes", "entries"
    );
    for b in &t.blocks {
        let _ = writeln!(
            s,
            "{:>10} {:>9} {:>8}  {}{}",
            b.offset,
            b.size,
            b.entries,
            b.last_key,
            b.file
                .map(|f| format!("  (kept in {f:06}.sst)"))
                .unwrap_or_default()
        );
    }
    if !t.dump.is_empty() {
        let _ = writeln!(s);
        for e in &t.dump {
            let _ = writeln!(
                s,
                "{} @{} {} {}",
                e.key,
                e.seqno,
                e.kind,
                if e.kind == "put" {
                    format!("({} bytes) {}", e.value_len, e.value)
                } else {
                    String::new()
                }
            );
        }
    }
    match &t.damage {
        Some(d) => {
            let _ = writeln!(s, "\nDAMAGED     {d}");
        }
        None if t.verified => {
            let _ = writeln!(s, "\nverified    every block read and checked");
        }
        None => {}
    }
    s
}

fn wal_text(w: &WalInspection) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "wal         {} ({}, {} valid)",
        w.file,
        format_size(w.bytes),
        format_size(w.valid_bytes)
    );
    let _ = writeln!(
        s,
        "follows     {}",
        w.predecessor
            .map(|(n, len)| format!("{n:06}.log at {len} bytes"))
            .unwrap_or_else(|| "nothing (first WAL, or written without a link)".to_string())
    );
    let _ = writeln!(
        s,
        "groups      {} holding {} puts and {} deletes{}",
        w.groups,
        w.puts,
        w.deletes,
        w.seqnos
            .map(|(a, b)| format!(", sequence numbers {a}..{b}"))
            .unwrap_or_default()
    );
    for r in &w.records {
        let _ = writeln!(
            s,
            "record @{:<10} {:>8} bytes {}",
            r.offset,
            r.bytes,
            match r.first_seqno {
                _ if r.link => "link".to_string(),
                Some(seq) => format!("{} ops from seq {seq}", r.ops),
                None => "empty group".to_string(),
            }
        );
    }
    if let Some(t) = &w.torn_tail {
        let _ = writeln!(
            s,
            "torn tail   {t} (a crash during an append; recovery drops it)"
        );
    }
    if let Some(d) = &w.damage {
        let _ = writeln!(s, "DAMAGED     {d}");
    }
    s
}
