//! How each run looks: its family (the panel of the line charts it is drawn in) and its style (a
//! colour and a dash pattern, the same in every chart, legend and table swatch).
//!
//! Families are presentation only: they come from policy names here and nowhere else, so a new
//! policy lands in "other" until this file names it.

use crate::results::{Comparison, RunResult};

/// A group of runs drawn together in one panel of the line charts, in panel order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Family {
    /// Leveling, tiering and lazy leveling, the textbook policies.
    Classic,
    /// Horizontal merges and Vertiorizon.
    Horizontal,
    /// Spooky and its lazy and tiered variants.
    Spooky,
    /// Every `partial-*` policy.
    Partial,
    /// EcoTune and Min-Max, the cost-model tuners.
    Tuners,
    /// Policies this file does not name (custom ones).
    Other,
    /// Other engines (RocksDB, fjall), whatever their own compaction style.
    Peers,
}

impl Family {
    /// Every family, in panel order.
    pub(super) const ALL: [Family; 7] = [
        Family::Classic,
        Family::Horizontal,
        Family::Spooky,
        Family::Partial,
        Family::Tuners,
        Family::Other,
        Family::Peers,
    ];

    /// The panel title.
    pub(super) fn title(self) -> &'static str {
        match self {
            Family::Classic => "classic (leveled, tiered, lazy leveling)",
            Family::Horizontal => "horizontal merges / Vertiorizon",
            Family::Spooky => "Spooky",
            Family::Partial => "partial merges",
            Family::Tuners => "EcoTune / Min-Max",
            Family::Other => "other policies",
            Family::Peers => "peers (other engines)",
        }
    }
}

/// The family a run is drawn with: peers by their engine, Strata runs by their policy name (the
/// label up to its first ':', where the options start).
pub(super) fn family(run: &RunResult) -> Family {
    // Results written by hand or by older tools may leave the engine empty; only a named engine
    // other than Strata is a peer.
    if !(run.engine.is_empty() || run.engine == "strata") {
        return Family::Peers;
    }
    let policy = run.label.split(':').next().unwrap_or_default();
    match policy {
        "leveled" | "leveled-full" | "tiered" | "lazy-leveled" => Family::Classic,
        "horizontal-leveled" | "horizontal-tiered" | "vertiorizon" | "vertiorizon-lazy" => {
            Family::Horizontal
        }
        "spooky" | "spooky-lazy" | "spooky-tiered" => Family::Spooky,
        "ecotune" | "minmax" => Family::Tuners,
        p if p.starts_with("partial-") => Family::Partial,
        _ => Family::Other,
    }
}

/// The runs of each family present in `c`, as run indices in comparison order, families in
/// panel order.
pub(super) fn families(c: &Comparison) -> Vec<(Family, Vec<usize>)> {
    Family::ALL
        .iter()
        .map(|&f| {
            let runs = (0..c.runs.len())
                .filter(|&i| family(&c.runs[i]) == f)
                .collect::<Vec<_>>();
            (f, runs)
        })
        .filter(|(_, runs)| !runs.is_empty())
        .collect()
}

/// Colours (the category-10 palette: distinct on white, and its neighbours stay apart for the
/// common forms of colour blindness). Each run also gets a dash pattern, and neighbours in a
/// family differ in both, so no reader has to rely on hue alone.
const PALETTE: [(u8, u8, u8); 10] = [
    (0x1f, 0x77, 0xb4),
    (0xff, 0x7f, 0x0e),
    (0x2c, 0xa0, 0x2c),
    (0xd6, 0x27, 0x28),
    (0x94, 0x67, 0xbd),
    (0x8c, 0x56, 0x4b),
    (0xe3, 0x77, 0xc2),
    (0x7f, 0x7f, 0x7f),
    (0xbc, 0xbd, 0x22),
    (0x17, 0xbe, 0xcf),
];

/// A line's dash pattern; scatter points and legend swatches show it as a marker shape too.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Pattern {
    /// A solid line; a circle.
    Solid,
    /// Long dashes; a square.
    Dashed,
    /// Dots; a triangle.
    Dotted,
    /// Dash, dot; a diamond.
    DashDot,
}

impl Pattern {
    /// Every pattern, in assignment order.
    pub(super) const ALL: [Pattern; 4] = [
        Pattern::Solid,
        Pattern::Dashed,
        Pattern::Dotted,
        Pattern::DashDot,
    ];

    /// On and off lengths in pixels, starting with "on"; empty for a solid line.
    pub(super) fn pattern(self) -> &'static [f64] {
        match self {
            Pattern::Solid => &[],
            Pattern::Dashed => &[9.0, 5.0],
            Pattern::Dotted => &[2.0, 4.0],
            Pattern::DashDot => &[9.0, 4.0, 2.0, 4.0],
        }
    }

    /// The pattern as an SVG `stroke-dasharray` value (`none` for a solid line).
    pub(super) fn dasharray(self) -> String {
        let p = self.pattern();
        if p.is_empty() {
            return "none".to_owned();
        }
        p.iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// How one run is drawn everywhere in the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Style {
    /// Line, point and swatch colour.
    pub colour: (u8, u8, u8),
    /// Line pattern (and marker shape).
    pub dash: Pattern,
}

impl Style {
    /// The `n`-th style. The first 40 are distinct pairs, and any run of consecutive ones differs
    /// in colour for 10 steps and in dash for 4: styles of runs `10q + r` take colour `r` and dash
    /// `(3q + r) mod 4`, which for a fixed colour cycles through all four dashes as `q` does.
    pub(super) fn nth(n: usize) -> Style {
        let (q, r) = (n / PALETTE.len(), n % PALETTE.len());
        Style {
            colour: PALETTE[r],
            dash: Pattern::ALL[(3 * q + r) % Pattern::ALL.len()],
        }
    }

    /// The colour as `#rrggbb`.
    pub(super) fn hex(self) -> String {
        let (r, g, b) = self.colour;
        format!("#{r:02x}{g:02x}{b:02x}")
    }
}

/// Each run's style, by run index. Styles are handed out family by family (in panel order), so a
/// family's runs get consecutive styles and differ from one another in colour and dash; every run
/// of a comparison of up to 40 gets a pair of its own.
pub(super) fn run_styles(c: &Comparison) -> Vec<Style> {
    let mut styles = vec![Style::nth(0); c.runs.len()];
    let order = families(c).into_iter().flat_map(|(_, runs)| runs);
    for (n, run) in order.enumerate() {
        styles[run] = Style::nth(n);
    }
    styles
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn the_first_forty_styles_are_distinct_and_neighbours_differ_in_both() {
        let styles: Vec<Style> = (0..40).map(Style::nth).collect();
        assert_eq!(styles.iter().collect::<HashSet<_>>().len(), 40);
        for pair in styles.windows(2) {
            assert_ne!(pair[0].colour, pair[1].colour);
            assert_ne!(pair[0].dash, pair[1].dash);
        }
    }

    #[test]
    fn peers_go_by_engine_and_options_do_not_change_the_family() {
        let run = |label: &str, engine: &str| RunResult {
            label: label.into(),
            engine: engine.into(),
            ..RunResult::default()
        };
        assert_eq!(family(&run("rocksdb", "rocksdb")), Family::Peers);
        assert_eq!(family(&run("leveled", "fjall")), Family::Peers);
        assert_eq!(
            family(&run("spooky:size_ratio=4", "strata")),
            Family::Spooky
        );
        assert_eq!(family(&run("partial-rr-p", "")), Family::Partial);
        assert_eq!(family(&run("size-tiered", "strata")), Family::Other);
        assert_eq!(Pattern::Dashed.dasharray(), "9 5");
        assert_eq!(Pattern::Solid.dasharray(), "none");
    }
}
