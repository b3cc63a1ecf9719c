//! Block compression as a plan names it: the codec an output's data blocks are written with.
//! A plan may name one ([`crate::PlanOutput::compression`]); without one, the executor's own
//! setting applies (the engine's `Options::with_compression`). Every policy takes
//! `compression_per_level` and `bottommost_compression` (RocksDB's names), which the registry
//! applies around the policy it builds ([`LevelCodecs`] as an
//! [`crate::adjust::OutputAdjustment`]).

use crate::adjust::OutputAdjustment;
pub use crate::codec::Compression;
use crate::context::PickContext;
use crate::plan::{FlushPlan, Plan, PlanAction};
use crate::policy::CompactionPolicy;
use strata_meta::Version;

/// The codecs of a policy's levels: `compression_per_level` (level i's codec; levels past the
/// list take its last entry; empty: the executor's setting) and `bottommost_compression` (the
/// codec of outputs no data lies below, which overrides the level's).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LevelCodecs {
    /// Level i's codec.
    pub per_level: Vec<Compression>,
    /// The codec of an output with nothing below it.
    pub bottommost: Option<Compression>,
}

impl LevelCodecs {
    /// Parses the two options' values: `per_level` a `/`-separated list of codecs (RocksDB
    /// separates them with `:`, which a policy specification reserves), empty for none, and
    /// `bottommost` a codec or empty. The error names the option and what was wrong.
    pub fn parse(per_level: &str, bottommost: &str) -> Result<LevelCodecs, (&'static str, String)> {
        let codec = |text: &str| {
            Compression::parse(text)
                .ok_or_else(|| format!("{text:?} is not a codec (none, lz4, zstd or zstd<level>)"))
        };
        let per_level = per_level
            .split('/')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(codec)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|why| (COMPRESSION_PER_LEVEL, why))?;
        let bottommost = match bottommost.trim() {
            "" => None,
            text => Some(codec(text).map_err(|why| (BOTTOMMOST_COMPRESSION, why))?),
        };
        Ok(LevelCodecs {
            per_level,
            bottommost,
        })
    }

    /// Whether neither option is set: the executor's setting applies everywhere.
    pub fn is_empty(&self) -> bool {
        self.per_level.is_empty() && self.bottommost.is_none()
    }

    /// The codec of a compaction's output into `level` of `version`, `None` for the executor's
    /// setting. The output is bottommost when no level below it holds a table: RocksDB's
    /// bottommost level, where the data a key ends in lives.
    pub fn codec_for(&self, version: &Version, level: usize) -> Option<Compression> {
        let below =
            (level + 1..version.num_levels()).any(|l| version.level(l).tables().next().is_some());
        if !below {
            if let Some(bottommost) = self.bottommost {
                return Some(bottommost);
            }
        }
        self.level_codec(level)
    }

    /// The codec `compression_per_level` gives `level`, which a flush takes too (as RocksDB's
    /// flushes do: never the bottommost codec).
    pub fn level_codec(&self, level: usize) -> Option<Compression> {
        self.per_level.get(level).or(self.per_level.last()).copied()
    }
}

/// The option naming each level's codec.
pub const COMPRESSION_PER_LEVEL: &str = "compression_per_level";
/// The option naming the codec of outputs nothing lies below.
pub const BOTTOMMOST_COMPRESSION: &str = "bottommost_compression";

/// Outputs carry the codec of their level: a merge's output the codec [`LevelCodecs::codec_for`]
/// gives, a flush's its level's ([`LevelCodecs::level_codec`]); the two options are added to the
/// policy's.
impl OutputAdjustment for LevelCodecs {
    fn adjust_flush(
        &self,
        _inner: &dyn CompactionPolicy,
        _version: &Version,
        _ctx: &PickContext<'_>,
        plan: &mut FlushPlan,
    ) {
        plan.output.compression = self.level_codec(plan.output.level);
    }

    fn adjust_plan(&self, _inner: &dyn CompactionPolicy, version: &Version, plan: &mut Plan) {
        if plan.action == PlanAction::Merge {
            if let Some(output) = plan.output.as_mut() {
                output.compression = self.codec_for(version, output.level);
            }
        }
    }

    /// The options set, as a policy lists its options.
    fn options(&self) -> Vec<(&'static str, String)> {
        let mut options = Vec::new();
        if !self.per_level.is_empty() {
            let per_level: Vec<String> = self.per_level.iter().map(ToString::to_string).collect();
            options.push((COMPRESSION_PER_LEVEL, per_level.join("/")));
        }
        if let Some(bottommost) = self.bottommost {
            options.push((BOTTOMMOST_COMPRESSION, bottommost.to_string()));
        }
        options
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_past_the_list_take_its_last_codec_and_bad_lists_are_named() {
        let codecs = LevelCodecs::parse("none/none/lz4", "zstd").unwrap();
        assert_eq!(codecs.per_level.len(), 3);
        assert_eq!(codecs.bottommost, Some(Compression::zstd(3)));
        assert_eq!(
            codecs.options(),
            vec![
                (COMPRESSION_PER_LEVEL, "none/none/lz4".to_string()),
                (BOTTOMMOST_COMPRESSION, "zstd".to_string())
            ]
        );
        assert!(LevelCodecs::parse("", "").unwrap().is_empty());
        let (option, why) = LevelCodecs::parse("none/snappy", "").unwrap_err();
        assert_eq!(option, COMPRESSION_PER_LEVEL);
        assert!(why.contains("snappy"), "{why}");
        let (option, _) = LevelCodecs::parse("lz4", "zip").unwrap_err();
        assert_eq!(option, BOTTOMMOST_COMPRESSION);
    }

    #[test]
    fn the_bottommost_codec_goes_where_nothing_lies_below_and_never_to_a_flush() {
        let codecs = LevelCodecs::parse("none/lz4", "zstd19").unwrap();
        let version = Version::parse(
            "L0:\n  run 1:\n    table 1 [a, c] size=1K\nL2:\n  run 2:\n    table 2 [a, z] size=9K\n",
        )
        .unwrap();
        let zstd19 = Some(Compression::zstd(19));
        assert_eq!(codecs.codec_for(&version, 0), Some(Compression::None));
        assert_eq!(codecs.codec_for(&version, 1), Some(Compression::Lz4));
        assert_eq!(codecs.codec_for(&version, 2), zstd19);
        assert_eq!(codecs.codec_for(&version, 5), zstd19);
        // Levels past the list take its last codec.
        let no_bottom = LevelCodecs::parse("none/lz4", "").unwrap();
        assert_eq!(no_bottom.codec_for(&version, 4), Some(Compression::Lz4));

        // Through the registry: every policy takes the options, and a flush into an empty
        // tree (nothing below it) still takes level 0's codec.
        let spec: crate::registry::PolicySpec =
            "tiered:compression_per_level=lz4,bottommost_compression=zstd"
                .parse()
                .unwrap();
        let policy = crate::registry::build_policy(&spec).unwrap();
        let empty = Version::new();
        let stats = crate::context::WorkloadStats::default();
        let leases = crate::leases::Leases::new();
        let ctx = PickContext::new(&leases, &stats);
        let flush = policy.plan_flush(&empty, &ctx).unwrap();
        assert_eq!(flush.output.compression, Some(Compression::Lz4));
        // What a database records of the policy builds it again, codecs included.
        let recorded = crate::registry::PolicySpec::of(policy.as_ref());
        let again = crate::registry::build_policy(&recorded).unwrap();
        assert_eq!(again.options(), policy.options());
        assert!(policy
            .options()
            .contains(&(BOTTOMMOST_COMPRESSION, "zstd".to_string())));
    }
}
