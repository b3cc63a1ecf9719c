//! The text form of a version: printed by `Display`, read back by [`Version::parse`].
//!
//! ```text
//! next-table 13
//! next-run 9
//! flushes 41
//! policy tiered:size_ratio=4
//! handover
//! policy-state {"counters":[1,0]}
//! retained 7 size=262144
//! L0:
//!   run 8:
//!     table 12 [a, c] size=1048576 entries=9000 tombstones=0 seqno=801..900 bloom=10
//!       block [a, b] size=4096 entries=40 file=12 offset=0
//!       block [bb, c] size=4101 entries=38 file=7 offset=8202
//! ```
//!
//! Printing writes every field, so print → parse gives an equal version. When parsing
//! hand-written shapes (tests), only `size` is required on a table line; `next-table` and
//! `next-run` default to one past the largest id used, `flushes` (printed only when nonzero) to
//! 0, and sizes accept the suffixes K, M, G, KiB, MiB, GiB (K = KiB = 1024). Blank lines and
//! lines starting with `#` are ignored.

use crate::edit::RetainedFile;
use crate::error::ParseError;
use crate::key::{format_key, parse_key};
use crate::state::PolicyState;
use crate::table::{BlockMeta, RunId, SeqRange, TableId, TableMeta};
use crate::version::Version;
use bytes::Bytes;
use std::fmt;
use std::sync::Arc;

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "next-table {}", self.next_table_id())?;
        writeln!(f, "next-run {}", self.next_run_id())?;
        if self.flushes() > 0 {
            writeln!(f, "flushes {}", self.flushes())?;
        }
        if let Some(policy) = self.policy() {
            writeln!(f, "policy {policy}")?;
        }
        if self.in_handover() {
            writeln!(f, "handover")?;
        }
        if !self.policy_state().is_empty() {
            writeln!(f, "policy-state {}", self.policy_state())?;
        }
        for (file, size) in self.retained_files() {
            writeln!(f, "retained {file} size={size}")?;
        }
        for (l, level) in self.levels().iter().enumerate() {
            if level.is_empty() {
                continue;
            }
            writeln!(f, "L{l}:")?;
            for run in level.runs() {
                writeln!(f, "  run {}:", run.id())?;
                for t in run.tables() {
                    write!(
                        f,
                        "    table {} [{}, {}] size={} entries={} tombstones={} seqno={}..{} bloom={}",
                        t.id,
                        format_key(&t.smallest),
                        format_key(&t.largest),
                        t.size,
                        t.entries,
                        t.tombstones,
                        t.seqnos.smallest,
                        t.seqnos.largest,
                        t.bloom_bits_per_key
                    )?;
                    if t.range_deletions > 0 {
                        write!(f, " range_deletions={}", t.range_deletions)?;
                    }
                    writeln!(f)?;
                    for b in t.blocks.iter().flat_map(|b| b.iter()) {
                        writeln!(
                            f,
                            "      block [{}, {}] size={} entries={} file={} offset={}",
                            format_key(&b.smallest),
                            format_key(&b.largest),
                            b.size,
                            b.entries,
                            b.file,
                            b.offset
                        )?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Formats a byte size compactly and exactly: `1MiB` for 1048576, `1536` for sizes that are not a
/// whole number of KiB, MiB or GiB. [`parse_size`] reads it back.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ];
    for (unit, name) in UNITS {
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{}{name}", bytes / unit);
        }
    }
    bytes.to_string()
}

/// The units [`parse_size`] accepts, as its error messages list them.
const SIZE_UNITS: &str = "B, K, KB, KiB, M, MB, MiB, G, GB, GiB, T, TB, TiB, in any case, all \
     binary: 1K = 1KB = 1KiB = 1024";

/// Parses a byte size such as `4096`, `64MiB`, `1.5k` or `2GB`.
///
/// The rule, one for every size in Strata (command-line flags, policy options, workload files):
/// a whole or decimal number, optional spaces, then an optional unit. Every unit is binary, so
/// `K`, `KB` and `KiB` all mean 1024 (`M`/`MB`/`MiB` 2^20, `G`/`GB`/`GiB` 2^30, `T`/`TB`/`TiB`
/// 2^40), and units are read in any case (`4k`, `4K`, `4kb` and `4KiB` are all 4096): storage
/// engines size buffers in powers of two, and a `4KB` that silently meant 4000 would be a
/// surprise. A bare number or `B` is bytes. Decimal numbers are rounded to the nearest byte.
/// Negative numbers, other units and sizes above `u64::MAX` are errors that list the accepted
/// units.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    if text.starts_with('-') {
        return Err(format!("size {text:?} is negative"));
    }
    let digits_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits_end);
    if number.is_empty() {
        return Err(format!(
            "size {text:?} does not start with a number (e.g. 4096, 64MiB, 1.5G; units: {SIZE_UNITS})"
        ));
    }
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => {
            return Err(format!(
                "unknown size unit {:?} in {text:?} (units: {SIZE_UNITS})",
                unit.trim()
            ))
        }
    };
    let multiplier = 1u64 << shift;
    if number.contains('.') {
        let value: f64 = number
            .parse()
            .map_err(|_| format!("size {text:?} is not a number"))?;
        let bytes = value * multiplier as f64;
        if !(bytes.is_finite() && bytes >= 0.0 && bytes < u64::MAX as f64) {
            return Err(format!("size {text:?} is out of range"));
        }
        Ok(bytes.round() as u64)
    } else {
        let value: u64 = number
            .parse()
            .map_err(|_| format!("size {text:?} is out of range"))?;
        value
            .checked_mul(multiplier)
            .ok_or_else(|| format!("size {text:?} is out of range"))
    }
}

struct Parser {
    levels: Vec<Vec<(RunId, Vec<TableMeta>)>>,
    level: Option<usize>,
    blocks: Vec<BlockMeta>,
    policy_state: PolicyState,
    policy: Option<String>,
    handover: bool,
    flushes: u64,
    next_table: Option<u64>,
    next_run: Option<u64>,
    retained: Vec<RetainedFile>,
}

fn err(line: usize, message: impl Into<String>) -> ParseError {
    ParseError {
        line,
        message: message.into(),
    }
}

/// Splits `"[lo, hi] rest"` into the two keys and the rest.
fn parse_bracket_range(text: &str, line: usize) -> Result<(Bytes, Bytes, &str), ParseError> {
    let text = text.trim_start();
    let inner_start = text
        .strip_prefix('[')
        .ok_or_else(|| err(line, "expected a key range like [a, c]"))?;
    let close = inner_start
        .find(']')
        .ok_or_else(|| err(line, "key range is missing its closing ]"))?;
    let inner = &inner_start[..close];
    let (lo, hi) = inner
        .split_once(',')
        .ok_or_else(|| err(line, "key range needs two keys separated by a comma"))?;
    let lo = parse_key(lo.trim()).map_err(|m| err(line, m))?;
    let hi = parse_key(hi.trim()).map_err(|m| err(line, m))?;
    Ok((lo, hi, &inner_start[close + 1..]))
}

/// Parses `key=value` fields, rejecting unknown or repeated keys.
fn parse_fields<'a>(
    text: &'a str,
    allowed: &[&str],
    line: usize,
) -> Result<Vec<(&'a str, &'a str)>, ParseError> {
    let mut fields: Vec<(&str, &str)> = Vec::new();
    for token in text.split_whitespace() {
        let (k, v) = token
            .split_once('=')
            .ok_or_else(|| err(line, format!("expected key=value, found {token:?}")))?;
        if !allowed.contains(&k) {
            return Err(err(
                line,
                format!("unknown field {k:?} (expected one of {allowed:?})"),
            ));
        }
        if fields.iter().any(|(seen, _)| *seen == k) {
            return Err(err(line, format!("field {k:?} given twice")));
        }
        fields.push((k, v));
    }
    Ok(fields)
}

fn field<'a>(fields: &[(&'a str, &'a str)], name: &str) -> Option<&'a str> {
    fields.iter().find(|(k, _)| *k == name).map(|(_, v)| *v)
}

fn number(value: &str, what: &str, line: usize) -> Result<u64, ParseError> {
    value.parse().map_err(|_| {
        err(
            line,
            format!("{what} {value:?} is not a non-negative integer"),
        )
    })
}

impl Parser {
    fn current_run(&mut self, line: usize) -> Result<&mut (RunId, Vec<TableMeta>), ParseError> {
        let level = self
            .level
            .ok_or_else(|| err(line, "a run must follow a level line like L1:"))?;
        self.levels[level]
            .last_mut()
            .ok_or_else(|| err(line, "a table must follow a run line like run 3:"))
    }

    fn finish_table(&mut self, line: usize) -> Result<(), ParseError> {
        if self.blocks.is_empty() {
            return Ok(());
        }
        let blocks: Arc<[BlockMeta]> = std::mem::take(&mut self.blocks).into();
        let run = self.current_run(line)?;
        match run.1.last_mut() {
            Some(table) => table.blocks = Some(blocks),
            None => return Err(err(line, "a block must follow a table line")),
        }
        Ok(())
    }

    fn line(&mut self, n: usize, text: &str) -> Result<(), ParseError> {
        let (word, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
        let rest = rest.trim();
        if word != "block" {
            self.finish_table(n)?;
        }
        match word {
            "next-table" => self.next_table = Some(number(rest, "next-table", n)?),
            "next-run" => self.next_run = Some(number(rest, "next-run", n)?),
            "flushes" => self.flushes = number(rest, "flushes", n)?,
            "retained" => {
                let (file, rest) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
                let file = TableId(number(file, "retained file", n)?);
                let fields = parse_fields(rest, &["size"], n)?;
                let size = field(&fields, "size")
                    .ok_or_else(|| err(n, "a retained file needs size=..."))?;
                let size = parse_size(size).map_err(|m| err(n, m))?;
                self.retained.push(RetainedFile { file, size });
            }
            "policy-state" => {
                self.policy_state = PolicyState::from_json(rest).map_err(|m| err(n, m))?
            }
            "policy" if !rest.is_empty() => self.policy = Some(rest.to_string()),
            "policy" => return Err(err(n, "a policy line names a policy: `policy leveled`")),
            "handover" => self.handover = true,
            "run" => {
                let id = rest
                    .strip_suffix(':')
                    .ok_or_else(|| err(n, "a run line looks like `run 3:`"))?;
                let id = RunId(number(id, "run id", n)?);
                let level = self
                    .level
                    .ok_or_else(|| err(n, "a run must follow a level line like L1:"))?;
                self.levels[level].push((id, Vec::new()));
            }
            "table" => {
                let (id, rest) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
                let id = number(id, "table id", n)?;
                let (smallest, largest, rest) = parse_bracket_range(rest, n)?;
                let fields = parse_fields(
                    rest,
                    &[
                        "size",
                        "entries",
                        "tombstones",
                        "range_deletions",
                        "seqno",
                        "bloom",
                    ],
                    n,
                )?;
                let size =
                    field(&fields, "size").ok_or_else(|| err(n, "a table needs size=..."))?;
                let mut table = TableMeta::new(
                    id,
                    smallest,
                    largest,
                    parse_size(size).map_err(|m| err(n, m))?,
                );
                if let Some(v) = field(&fields, "entries") {
                    table.entries = number(v, "entries", n)?;
                }
                if let Some(v) = field(&fields, "tombstones") {
                    table.tombstones = number(v, "tombstones", n)?;
                }
                if let Some(v) = field(&fields, "range_deletions") {
                    table.range_deletions = number(v, "range_deletions", n)?;
                }
                if let Some(v) = field(&fields, "seqno") {
                    let (lo, hi) = v
                        .split_once("..")
                        .ok_or_else(|| err(n, "seqno looks like seqno=1..20"))?;
                    table.seqnos = SeqRange {
                        smallest: number(lo, "seqno", n)?,
                        largest: number(hi, "seqno", n)?,
                    };
                }
                if let Some(v) = field(&fields, "bloom") {
                    table.bloom_bits_per_key = v
                        .parse()
                        .map_err(|_| err(n, format!("bloom {v:?} is not a number")))?;
                }
                self.current_run(n)?.1.push(table);
            }
            "block" => {
                let (smallest, largest, rest) = parse_bracket_range(rest, n)?;
                let fields = parse_fields(rest, &["size", "entries", "file", "offset"], n)?;
                let get = |name: &str| {
                    field(&fields, name).ok_or_else(|| err(n, format!("a block needs {name}=...")))
                };
                let block = BlockMeta {
                    smallest,
                    largest,
                    size: parse_size(get("size")?).map_err(|m| err(n, m))?,
                    entries: number(get("entries")?, "entries", n)?,
                    file: TableId(number(get("file")?, "file", n)?),
                    offset: number(get("offset")?, "offset", n)?,
                };
                if self.current_run(n)?.1.is_empty() {
                    return Err(err(n, "a block must follow a table line"));
                }
                self.blocks.push(block);
            }
            level if level.starts_with('L') && level.ends_with(':') && rest.is_empty() => {
                let l: usize = level[1..level.len() - 1]
                    .parse()
                    .map_err(|_| err(n, format!("bad level line {level:?}")))?;
                if l >= Version::MAX_LEVELS {
                    return Err(err(
                        n,
                        format!("level {l} is beyond the maximum of {}", Version::MAX_LEVELS),
                    ));
                }
                if self.levels.len() <= l {
                    self.levels.resize_with(l + 1, Vec::new);
                }
                if !self.levels[l].is_empty() {
                    return Err(err(n, format!("level {l} appears twice")));
                }
                self.level = Some(l);
            }
            other => return Err(err(n, format!("unexpected line starting with {other:?}"))),
        }
        Ok(())
    }
}

impl Version {
    /// Parses the text form printed by `Display` (see the module docs), checking every invariant.
    pub fn parse(text: &str) -> Result<Version, ParseError> {
        let mut p = Parser {
            levels: Vec::new(),
            level: None,
            blocks: Vec::new(),
            policy_state: PolicyState::empty(),
            policy: None,
            handover: false,
            next_table: None,
            next_run: None,
            flushes: 0,
            retained: Vec::new(),
        };
        let mut last_line = 0;
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            last_line = i + 1;
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            p.line(i + 1, line)?;
        }
        p.finish_table(last_line)?;
        let max_table = p
            .levels
            .iter()
            .flatten()
            .flat_map(|(_, ts)| ts.iter().map(|t| t.id.0.saturating_add(1)))
            .max();
        let max_run = p
            .levels
            .iter()
            .flatten()
            .map(|(id, _)| id.0.saturating_add(1))
            .max();
        let next_table = p.next_table.unwrap_or(max_table.unwrap_or(0));
        let next_run = p.next_run.unwrap_or(max_run.unwrap_or(0));
        Version::from_parts(p.levels, p.retained, p.policy_state, next_table, next_run)
            .map(|v| {
                v.with_flushes(p.flushes)
                    .with_policy(p.policy)
                    .with_handover(p.handover)
            })
            .map_err(|e| err(0, e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHAPE: &str = "
# a hand-written shape
flushes 41
policy tiered:size_ratio=4
policy-state {\"c\":[1,2]}
L0:
  run 8:
    table 12 [a, c] size=1MiB
L2:
  run 3:
    table 4 [a, f] size=4K entries=10 tombstones=1 range_deletions=2 seqno=1..9 bloom=9.5
      block [a, b] size=2K entries=5 file=4 offset=0
      block [c, f] size=2K entries=5 file=4 offset=2048
    table 7 [g, 0x67ff] size=100
  run 2:
    table 1 [b, d] size=7
";

    #[test]
    fn parses_hand_written_shapes() {
        let v = Version::parse(SHAPE).unwrap();
        assert_eq!(v.num_levels(), 3);
        assert!(v.level(1).is_empty());
        assert_eq!(v.level(0).size(), 1 << 20);
        assert_eq!(v.level(2).runs().len(), 2);
        assert_eq!(v.next_table_id(), 13);
        assert_eq!(v.next_run_id(), 9);
        assert_eq!(v.flushes(), 41);
        assert_eq!(v.policy(), Some("tiered:size_ratio=4"));
        let t = v.table(TableId(4)).unwrap();
        assert_eq!(t.blocks.as_ref().map(|b| b.len()), Some(2));
        assert_eq!(t.bloom_bits_per_key, 9.5);
        assert_eq!(t.range_deletions, 2);
    }

    #[test]
    fn print_then_parse_is_identity() {
        let v = Version::parse(SHAPE).unwrap();
        let printed = v.to_string();
        let again = Version::parse(&printed).unwrap();
        assert_eq!(v, again);
        assert_eq!(printed, again.to_string());
    }

    #[test]
    fn parse_errors_name_the_line_and_problem() {
        let bad = "L1:\n  run 1:\n    table 1 [c, a] size=1\n";
        let e = Version::parse(bad).unwrap_err();
        assert!(e.message.contains("smallest key is after largest"), "{e}");
        let e = Version::parse("L1:\n  table 1 [a, b] size=1\n").unwrap_err();
        assert_eq!(e.line, 2);
        let e = Version::parse("L1:\n  run 1:\n    table 1 [a, b] size=1 color=red\n").unwrap_err();
        assert!(e.message.contains("unknown field"), "{e}");
        let e =
            Version::parse("L1:\n  run 1:\n    table 1 [a, b] size=1\n    table 2 [b, c] size=1\n")
                .unwrap_err();
        assert!(e.message.contains("overlap"), "{e}");
        assert!(Version::parse(
            "L1:\n  run 1:\n    table 1 [a, b] size=1\n  run 1:\n    table 2 [x, y] size=1\n"
        )
        .is_err());
        assert!(
            Version::parse("next-table 1\nL1:\n  run 1:\n    table 5 [a, b] size=1\n").is_err()
        );
    }

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_size("2G").unwrap(), 2 << 30);
        assert_eq!(parse_size("1.5K").unwrap(), 1536);
        assert!(parse_size("3 parsecs").is_err());
        assert!(parse_size("99999999999999999999T").is_err());
        assert!(parse_size("99999999999999999999").is_err());
        assert!(parse_size("16777216T").is_err(), "2^64 overflows");
        for n in [0, 1, 1023, 1024, 1536, 1 << 20, 3 << 30, (1 << 40) + 1] {
            assert_eq!(parse_size(&format_size(n)).unwrap(), n);
        }
        assert_eq!(format_size(64 << 20), "64MiB");
    }

    #[test]
    fn every_unit_is_binary_in_any_case() {
        for text in [
            "4K", "4k", "4KB", "4kb", "4Kb", "4KiB", "4kib", "4 KiB", " 4096 ", "4096B",
        ] {
            assert_eq!(parse_size(text).unwrap(), 4096, "{text}");
        }
        for (text, bytes) in [
            ("3m", 3u64 << 20),
            ("3MB", 3 << 20),
            ("3mib", 3 << 20),
            ("2g", 2 << 30),
            ("2GB", 2 << 30),
            ("1t", 1 << 40),
            ("1TiB", 1 << 40),
            ("0", 0),
            ("0.5k", 512),
        ] {
            assert_eq!(parse_size(text).unwrap(), bytes, "{text}");
        }
    }

    #[test]
    fn bad_sizes_say_what_is_accepted() {
        for text in ["4PB", "4 kilobytes", "4Ki", "4kB/s", "1e3"] {
            let e = parse_size(text).unwrap_err();
            assert!(
                e.contains("unknown size unit") && e.contains(SIZE_UNITS),
                "{e}"
            );
        }
        assert!(parse_size("-4K").unwrap_err().contains("negative"));
        for text in ["", "K", "MiB", "abc"] {
            let e = parse_size(text).unwrap_err();
            assert!(e.contains("does not start with a number"), "{text:?}: {e}");
        }
        assert!(parse_size("1.2.3K").unwrap_err().contains("not a number"));
    }
}
