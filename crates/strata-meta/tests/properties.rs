//! Property tests for `strata-meta`: random edit sequences checked against a simple model, the
//! text round trip, and robustness of `Version::parse` against arbitrary and mutated input.

use proptest::prelude::*;
use proptest::sample::{select, Index};
use std::collections::BTreeMap;
use std::sync::Arc;
use strata_meta::{
    BlockMeta, Bytes, EditError, PolicyState, RunId, TableId, TableLocation, TableMeta, Version,
    VersionEdit,
};

/// Levels the generators use (0..LEVELS).
const LEVELS: usize = 7;

/// Bytes that stress the key text encoding (delimiters, whitespace, non-ASCII, the `0x` marker).
const AWKWARD: &[u8] = b"\x00\xff,][ 0x#=\"aZ\n\x7f\x80";

/// Keys are `prefix ++ six decimal digits ++ suffix`. The fixed-width digits make byte order follow
/// integer order, so new runs get disjoint tables from plain integers while the prefix and
/// suffixes bring in awkward bytes. Suffixes are at most 2 bytes (see `Decor::table`).
#[derive(Clone, Debug, Default)]
struct Keys(Vec<u8>);

impl Keys {
    fn key(&self, n: u32, suffix: &[u8]) -> Vec<u8> {
        [&self.0[..], format!("{n:06}").as_bytes(), suffix].concat()
    }
}

fn keys() -> impl Strategy<Value = Keys> {
    let awkward = prop::collection::vec(select(AWKWARD.to_vec()), 1..3);
    prop_oneof![Just(vec![]), Just(b"0x".to_vec()), awkward].prop_map(Keys)
}

/// (gap before, width, size) of one block.
type BlockSpec = (u32, u32, u64);

/// Table metadata beyond the key range (in `meta`, whose id and keys are placeholders), which must
/// survive edits and the text form unchanged, plus how to pick keys and blocks for a range.
/// Sizes and counts stay far below u64::MAX so that the model can sum them exactly (versions
/// saturate such sums; the unit tests in `src/version/tests.rs` cover that).
#[derive(Clone, Debug)]
struct Decor {
    meta: TableMeta,
    suffixes: (Vec<u8>, Vec<u8>),
    blocks: Option<Vec<BlockSpec>>,
}

fn suffix() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(select(AWKWARD.to_vec()), 0..3)
}

prop_compose! {
    fn decor()(
        (size, entries, t) in (1u64..1 << 36, 0u64..1 << 30, any::<u64>()),
        (s, len) in (0u64..1 << 60, 0u64..1 << 20),
        bloom in prop_oneof![Just(0.0), Just(10.0), 0.0f64..20.0],
        suffixes in (suffix(), suffix()),
        blocks in prop::option::of(prop::collection::vec(
            (0u32..4, 0u32..30, 1u64..1 << 20),
            1..5,
        )),
    ) -> Decor {
        let mut meta = TableMeta::new(0, vec![], vec![], size);
        (meta.entries, meta.tombstones) = (entries, t % (entries + 1));
        // Range tombstones on one table in four.
        meta.range_deletions = if t % 4 == 0 { t % 7 } else { 0 };
        meta.bloom_bits_per_key = bloom;
        (meta.seqnos.smallest, meta.seqnos.largest) = (s, s + len);
        Decor { meta, suffixes, blocks }
    }
}

impl Decor {
    /// Builds table `id` covering the integer keys `lo..=hi`.
    fn table(&self, keys: &Keys, id: u64, lo: u32, hi: u32) -> TableMeta {
        let (mut a, mut b) = self.suffixes.clone();
        if lo == hi && a > b {
            std::mem::swap(&mut a, &mut b);
        }
        let mut t = self.meta.clone();
        let (smallest, largest) = (keys.key(lo, &a), keys.key(hi, &b));
        (t.id, t.smallest, t.largest) = (TableId(id), smallest.into(), largest.into());
        // Blocks cover integer sub-ranges; edge blocks reuse the table's own bounds, inner bounds
        // use the smallest key (no suffix) and a larger-than-any-suffix key of that integer.
        let bound = |edge: bool, own: &Bytes, n, sfx: &[u8]| match edge {
            true => own.clone(),
            false => Bytes::from(keys.key(n, sfx)),
        };
        let mut blocks = Vec::new();
        let mut cursor = lo;
        // Every block is the table's own: references to other files must name files the version
        // keeps, which `tests/references.rs` covers.
        for &(gap, width, size) in self.blocks.iter().flatten() {
            let (b_lo, b_hi) = (cursor + gap, (cursor + gap + width).min(hi));
            if b_lo > hi {
                break;
            }
            blocks.push(BlockMeta {
                smallest: bound(b_lo == lo, &t.smallest, b_lo, b""),
                largest: bound(b_hi == hi, &t.largest, b_hi, &[0xff; 4]),
                size,
                entries: size / 64,
                file: TableId(id),
                offset: size * blocks.len() as u64,
            });
            cursor = b_hi + 1;
        }
        // `Some(empty)` prints like `None` (reported separately), so generate `None` instead.
        t.blocks = (!blocks.is_empty()).then(|| blocks.into());
        t
    }
}

/// An intention, resolved against the current version when it runs (indices pick existing items).
#[derive(Clone, Debug)]
enum Op {
    /// New run at `level` with tables at `base + gap`, `width` keys wide, one after another.
    Create(usize, u32, Vec<(u32, u32, Decor)>),
    Delete(Index),
    /// Move a table to another run it does not overlap (if `to_existing` and one exists), else to
    /// a new run `1 + shift` levels further down (mod LEVELS).
    Move(Index, bool, Index, usize),
    /// Replace 1..=4 adjacent tables of a run by one table, in the same run or in a new one.
    Merge(Index, Index, usize, bool, Box<Decor>),
    Policy(String),
    /// A deliberately invalid edit.
    Bad(Bad, Index, Index),
}

#[derive(Clone, Copy, Debug)]
enum Bad {
    Overlap,
    WrongRun,
    ReuseId,
    ExistingRun,
    EmptyRun,
    MissingRun,
    InvalidTable,
    TooDeep,
}

/// A small compact JSON object, as a policy would encode it.
fn json() -> impl Strategy<Value = String> {
    let map = prop::collection::btree_map("[a-z]{1,3}", (any::<i64>(), "[ -~]{0,6}"), 0..4);
    map.prop_map(|m| serde_json::to_string(&m).expect("plain values serialize"))
}

fn op(valid_only: bool) -> impl Strategy<Value = Op> {
    use Bad::*;
    let tables = prop::collection::vec((0u32..20, 0u32..100, decor()), 1..5);
    let idx = any::<Index>;
    prop_oneof![
        4 => (0..LEVELS, 0u32..5000, tables).prop_map(|(l, b, ts)| Op::Create(l, b, ts)),
        2 => idx().prop_map(Op::Delete),
        2 => (idx(), any::<bool>(), idx(), 0..LEVELS - 1)
            .prop_map(|(t, e, r, s)| Op::Move(t, e, r, s)),
        2 => (idx(), idx(), 1usize..5, any::<bool>(), decor())
            .prop_map(|(r, s, n, new, d)| Op::Merge(r, s, n, new, Box::new(d))),
        1 => json().prop_map(Op::Policy),
        if valid_only { 0 } else { 3 } => (
            select(vec![Overlap, WrongRun, ReuseId, ExistingRun]),
            idx(),
            idx(),
        ).prop_map(|(b, i, j)| Op::Bad(b, i, j)),
        if valid_only { 0 } else { 2 } => (
            select(vec![EmptyRun, MissingRun, InvalidTable, TooDeep]),
            idx(),
            idx(),
        ).prop_map(|(b, i, j)| Op::Bad(b, i, j)),
    ]
}

/// What the test pins down of an error: not the order of an overlapping pair, nor messages.
fn same_error(e: &EditError, want: &EditError) -> bool {
    let key = |e: &EditError| match e {
        EditError::Overlap { level, run, .. } => format!("overlap in {level}/{run}"),
        EditError::InvalidTable(_) => "invalid table".to_string(),
        e => format!("{e:?}"),
    };
    key(e) == key(want)
}

fn at(level: usize, run: RunId) -> TableLocation {
    TableLocation { level, run }
}

/// A model table: where it is, and its metadata.
type MTable = (TableLocation, Arc<TableMeta>);

/// The version under test next to an independent model of it.
#[derive(Default)]
struct Sim {
    keys: Keys,
    version: Version,
    tables: BTreeMap<TableId, MTable>,
    /// Run ids per level, newest first (the documented placement rule, replayed by the model).
    order: BTreeMap<usize, Vec<RunId>>,
    policy: String,
}

impl Sim {
    fn runs(&self) -> Vec<TableLocation> {
        let mut out = Vec::new();
        for (&l, ids) in &self.order {
            out.extend(ids.iter().map(|&r| at(l, r)));
        }
        out
    }

    /// The model's tables of one run, in key order.
    fn run_tables(&self, run: TableLocation) -> Vec<&MTable> {
        let mut ts: Vec<&MTable> = self.tables.values().filter(|t| t.0 == run).collect();
        ts.sort_by(|a, b| a.1.smallest.cmp(&b.1.smallest));
        ts
    }

    fn pick_table(&self, i: Index) -> Option<MTable> {
        let all: Vec<&MTable> = self.tables.values().collect();
        (!all.is_empty()).then(|| i.get(&all).to_owned().clone())
    }

    /// Turns an intention into an edit and the error it must fail with (`None`: it must succeed);
    /// `None` overall when the intention needs something the version lacks.
    fn plan(&self, op: &Op) -> Option<(VersionEdit, Option<EditError>)> {
        let next_id = self.version.next_table_id();
        let new_run = RunId(self.version.next_run_id());
        let mut edit = VersionEdit::new();
        let mut expect = None;
        match op {
            Op::Create(level, base, specs) => {
                edit.create_run(*level, new_run);
                let mut cursor = *base;
                for (i, (gap, width, d)) in specs.iter().enumerate() {
                    let (lo, hi, id) = (cursor + gap, cursor + gap + width, next_id + i as u64);
                    edit.add_table(*level, new_run, d.table(&self.keys, id, lo, hi));
                    cursor = hi + 1;
                }
            }
            Op::Delete(i) => {
                let (loc, t) = self.pick_table(*i)?;
                edit.delete_table(loc.level, loc.run, t.id);
            }
            Op::Move(i, to_existing, r, shift) => {
                let (loc, t) = self.pick_table(*i)?;
                let fits = |run: &TableLocation| {
                    let mut others = self.run_tables(*run).into_iter();
                    run.run != loc.run
                        && others.all(|o| o.1.largest < t.smallest || t.largest < o.1.smallest)
                };
                let targets: Vec<TableLocation> = self.runs().into_iter().filter(fits).collect();
                edit.delete_table(loc.level, loc.run, t.id);
                let to = if *to_existing && !targets.is_empty() {
                    *r.get(&targets)
                } else {
                    let level = (loc.level + 1 + shift) % LEVELS;
                    edit.create_run(level, new_run);
                    at(level, new_run)
                };
                edit.add_table(to.level, to.run, t);
            }
            Op::Merge(r, start, n, into_new, d) => {
                let runs = self.runs();
                let &from = (!runs.is_empty()).then(|| r.get(&runs))?;
                let ts = self.run_tables(from);
                let first = start.index(ts.len());
                let inputs = &ts[first..(first + n).min(ts.len())];
                for (_, t) in inputs {
                    edit.delete_table(from.level, from.run, t.id);
                }
                // The replacement spans exactly its inputs, so it fits where they were.
                let mut out = d.table(&self.keys, next_id, 0, 0);
                out.smallest = inputs[0].1.smallest.clone();
                out.largest = inputs[inputs.len() - 1].1.largest.clone();
                out.blocks = None;
                let to = if *into_new { new_run } else { from.run };
                if *into_new {
                    edit.create_run(from.level, new_run);
                }
                edit.add_table(from.level, to, out);
            }
            Op::Policy(text) => {
                edit.set_policy_state(PolicyState::from_json(text).expect("generated JSON"));
            }
            Op::Bad(bad, i, j) => {
                let (k0, k9) = (self.keys.key(0, b""), self.keys.key(9, b""));
                let fresh = TableMeta::new(next_id, k0, k9, 1);
                let (level, run) = (j.index(LEVELS), new_run);
                expect = Some(match bad {
                    Bad::Overlap => {
                        // A one-key table at the smallest key of an existing table, same run.
                        let (loc, t) = self.pick_table(*i)?;
                        let mut dup = fresh;
                        (dup.smallest, dup.largest) = (t.smallest.clone(), t.smallest.clone());
                        edit.add_table(loc.level, loc.run, dup);
                        let (left, right) = (t.id, TableId(next_id));
                        EditError::Overlap {
                            level: loc.level,
                            run: loc.run,
                            left,
                            right,
                        }
                    }
                    Bad::WrongRun => {
                        // Another run, or the right run id named at the wrong level.
                        let (loc, t) = self.pick_table(*i)?;
                        let other = self.runs().into_iter().find(|r| r.run != loc.run);
                        let wrong = other.unwrap_or(at((loc.level + 1) % LEVELS, loc.run));
                        let (table, level, run) = (t.id, wrong.level, wrong.run);
                        edit.delete_table(level, run, table);
                        EditError::TableNotFound { table, level, run }
                    }
                    Bad::ReuseId => {
                        let (_, t) = self.pick_table(*i)?;
                        edit.create_run(level, run).add_table(level, run, t.clone());
                        EditError::DuplicateTable(t.id)
                    }
                    Bad::ExistingRun => {
                        let run = self.pick_table(*i)?.0.run;
                        edit.create_run(level, run).add_table(level, run, fresh);
                        EditError::RunExists(run)
                    }
                    Bad::EmptyRun => {
                        edit.create_run(level, run);
                        EditError::EmptyNewRun { level, run }
                    }
                    Bad::MissingRun => {
                        edit.add_table(level, run, fresh);
                        EditError::RunNotFound { level, run }
                    }
                    Bad::InvalidTable => {
                        let mut broken = fresh;
                        broken.tombstones = broken.entries + 1;
                        edit.create_run(level, run).add_table(level, run, broken);
                        EditError::InvalidTable(String::new())
                    }
                    Bad::TooDeep => {
                        let (level, max) = (Version::MAX_LEVELS, Version::MAX_LEVELS);
                        edit.create_run(level, run).add_table(level, run, fresh);
                        EditError::LevelOutOfRange { level, max }
                    }
                });
            }
        }
        Some((edit, expect))
    }

    /// Plans and applies one intention, then checks the result against the plan and the model.
    fn step(&mut self, op: &Op) -> Result<(), TestCaseError> {
        let Some((edit, expect)) = self.plan(op) else {
            return Ok(()); // nothing to act on yet
        };
        let before = self.version.clone();
        match (&expect, self.version.apply(&edit)) {
            (Some(want), Err(e)) => {
                prop_assert!(same_error(&e, want), "got {e:?}, want {want:?}: {op:?}");
                // A failed apply changes nothing.
                prop_assert_eq!(&self.version, &before);
                prop_assert_eq!(self.version.to_string(), before.to_string());
            }
            (Some(_), Ok(_)) => prop_assert!(false, "invalid edit accepted: {op:?}"),
            (None, Err(e)) => prop_assert!(false, "valid edit failed with {e}: {op:?}"),
            (None, Ok(v)) => {
                prop_assert_eq!(v.check_invariants(), Ok(()));
                // Counts, bytes and the id high-water mark move by exactly what the edit says.
                let gone: u64 = edit
                    .deleted
                    .iter()
                    .map(|d| self.tables[&d.table].1.size)
                    .sum();
                let added: u64 = edit.added.iter().map(|a| a.table.size).sum();
                let (old_count, new_count) = (before.table_count(), v.table_count());
                prop_assert_eq!(new_count + edit.deleted.len(), old_count + edit.added.len());
                prop_assert_eq!(v.size() + gone, before.size() + added);
                let next = edit.added.iter().map(|a| a.table.id.0 + 1);
                let next = next.fold(before.next_table_id(), u64::max);
                prop_assert_eq!(v.next_table_id(), next);
                self.update(&edit);
                self.version = v;
                self.compare()?;
            }
        }
        Ok(())
    }

    /// The model's reading of a successful edit, following the rules documented on `VersionEdit`.
    fn update(&mut self, edit: &VersionEdit) {
        for d in &edit.deleted {
            self.tables.remove(&d.table);
        }
        for n in &edit.new_runs {
            // Just before the newest run of that level the edit deletes from, else at the front.
            let runs = self.order.entry(n.level).or_default();
            let input = |r: &RunId| {
                edit.deleted
                    .iter()
                    .any(|d| (d.level, d.run) == (n.level, *r))
            };
            let pos = runs.iter().position(input).unwrap_or(0);
            runs.insert(pos, n.run);
        }
        for a in &edit.added {
            let t = (at(a.level, a.run), a.table.clone());
            self.tables.insert(a.table.id, t);
        }
        let tables = &self.tables;
        for (&l, runs) in self.order.iter_mut() {
            runs.retain(|&r| tables.values().any(|t| t.0 == at(l, r)));
        }
        self.order.retain(|_, runs| !runs.is_empty());
        if let Some(p) = &edit.policy_state {
            self.policy = p.as_str().to_string();
        }
    }

    fn compare(&self) -> Result<(), TestCaseError> {
        let v = &self.version;
        // Same levels, runs in the same order, tables in key order.
        let actual: Vec<_> = v.tables().map(|(l, r, t)| (l, r.id(), t.id)).collect();
        let mut expected = Vec::new();
        for r in self.runs() {
            expected.extend(self.run_tables(r).iter().map(|t| (r.level, r.run, t.1.id)));
        }
        prop_assert_eq!(actual, expected);
        let deepest = self.order.keys().last();
        prop_assert_eq!(v.num_levels(), deepest.map_or(0, |l| l + 1));
        prop_assert_eq!(v.table_count(), self.tables.len());
        prop_assert_eq!(v.policy_state().as_str(), self.policy.as_str());
        for (_, _, t) in v.tables() {
            prop_assert!(t.id.0 < v.next_table_id(), "table {} >= next-table", t.id);
        }
        // Every id below the high-water mark is where the model says, or absent in both.
        for id in (0..v.next_table_id()).map(TableId) {
            let t = self.tables.get(&id);
            prop_assert_eq!(v.table_location(id), t.map(|t| t.0));
            prop_assert_eq!(v.table(id), t.map(|t| &t.1));
        }
        Ok(())
    }
}

fn run(keys: Keys, ops: &[Op]) -> Result<Version, TestCaseError> {
    let mut sim = Sim {
        keys,
        ..Sim::default()
    };
    for op in ops {
        sim.step(op)?;
    }
    Ok(sim.version)
}

/// Parsing must not panic (a panic fails the test); a parsed version must be sound and stable.
fn check_parse(text: &str) -> Result<(), TestCaseError> {
    if let Ok(v) = Version::parse(text) {
        prop_assert_eq!(v.check_invariants(), Ok(()));
        prop_assert_eq!(Version::parse(&v.to_string()), Ok(v));
    }
    Ok(())
}

/// Lines shaped like the text form (so that some texts parse), with odd values mixed in.
fn soup() -> impl Strategy<Value = String> {
    let words = |s: &'static str| select(s.split('|').collect::<Vec<_>>());
    let num = || words("0|1|1|2|5|18446744073709551615|18446744073709551614|-1|x");
    let key = || words("a|b|c|d|0x|0x00|0xff|0x€a|0xé|0x1|0xZZ|0X61|é|");
    let size = words("size=1|size=2K|size=1.5M|size=4 entries=1 file=7 offset=0|size=|color=red");
    let more = words(
        "entries=3|tombstones=1|tombstones=9|seqno=1..5|seqno=5..1|bloom=9.37|bloom=-1|bloom=NaN|\
         bloom=inf|offset=0",
    );
    let fields =
        (size, prop::collection::vec(more, 0..2)).prop_map(|(s, m)| format!("{s} {}", m.join(" ")));
    let line = prop_oneof![
        3 => (words("next-table |next-run |run |L"), num()).prop_map(|(w, n)| match w {
            "run " | "L" => format!("{w}{n}:"),
            _ => format!("{w}{n}"),
        }),
        4 => (any::<bool>(), num(), key(), key(), fields).prop_map(|(table, n, a, b, f)| {
            match table {
                true => format!("table {n} [{a}, {b}] {f}"),
                false => format!("block [{a}, {b}] {f}"),
            }
        }),
        1 => words("policy-state {\"a\":[1]}|policy-state [1|policy-state|L64:|# x|")
            .prop_map(String::from),
        1 => ".{0,20}",
    ];
    prop::collection::vec(line, 0..16).prop_map(|ls| ls.join("\n"))
}

/// (kind, line, column, char): 0 deletes the line, 1 swaps it with line `column`, 2 sets the
/// character, 3 replaces the line's first number (usually an id) by u64::MAX.
type Mutation = (u8, Index, Index, char);

fn mutation() -> impl Strategy<Value = Mutation> {
    let ch = prop_oneof![
        any::<char>(),
        select("0123456789abcdefx []:,.=-L#€\n".chars().collect::<Vec<_>>())
    ];
    (0u8..4, any::<Index>(), any::<Index>(), ch)
}

fn mutate(lines: &mut Vec<String>, (kind, i, j, c): Mutation) {
    let n = lines.len();
    let Some(i) = (n > 0).then(|| i.index(n)) else {
        return;
    };
    let mut chars: Vec<char> = lines[i].chars().collect();
    match kind {
        0 => drop(lines.remove(i)),
        1 => lines.swap(i, j.index(n)),
        2 if chars.is_empty() => lines[i].push(c),
        2 => {
            let at = j.index(chars.len());
            chars[at] = c;
            lines[i] = chars.into_iter().collect();
        }
        _ => {
            let digits = lines[i]
                .split(|c: char| !c.is_ascii_digit())
                .find(|d| !d.is_empty());
            if let Some(d) = digits.map(str::to_owned) {
                lines[i] = lines[i].replacen(&d, "18446744073709551615", 1);
            }
        }
    }
}

proptest! {
    #[test]
    fn edits_keep_invariants_and_match_the_model(
        keys in keys(),
        ops in prop::collection::vec(op(false), 1..40),
    ) {
        run(keys, &ops)?;
    }

    #[test]
    fn text_form_round_trips(keys in keys(), ops in prop::collection::vec(op(true), 1..30)) {
        let v = run(keys, &ops)?;
        let text = v.to_string();
        let parsed = Version::parse(&text);
        prop_assert_eq!(parsed.as_ref(), Ok(&v));
        prop_assert_eq!(parsed.unwrap().to_string(), text);
    }

    #[test]
    fn parse_survives_arbitrary_text(text in prop_oneof![any::<String>(), soup()]) {
        check_parse(&text)?;
    }

    #[test]
    fn parse_survives_mutated_versions(
        keys in keys(),
        ops in prop::collection::vec(op(true), 1..12),
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let text = run(keys, &ops)?.to_string();
        let mut lines: Vec<String> = text.lines().map(String::from).collect();
        for m in mutations {
            mutate(&mut lines, m);
        }
        check_parse(&lines.join("\n"))?;
    }
}
