//! Block codecs: how a table's data blocks are compressed, as plans name them
//! ([`crate::PlanOutput::compression`]) and the engine writes them.

use std::fmt;

/// How a table's data blocks are compressed. A block that does not shrink by at least 1/8 is
/// stored uncompressed whatever the setting.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Compression {
    /// No compression.
    None,
    /// LZ4 (fast; the usual choice for upper levels).
    Lz4,
    /// Zstandard at `level` (smaller; the usual choice for the last level). Levels outside
    /// zstd's range are clamped by zstd.
    Zstd {
        /// Compression level (1–22; 3 is zstd's default; negative levels trade ratio for speed).
        level: i32,
    },
}

/// zstd's own default level, what `zstd` without a level means.
pub const ZSTD_DEFAULT_LEVEL: i32 = 3;

impl Compression {
    /// Parses `none`, `lz4`, `zstd` (level 3) or `zstd` followed by a level: `zstd19`,
    /// `zstd-1`, or `zstd:19`.
    pub fn parse(text: &str) -> Option<Compression> {
        match text.trim() {
            "none" => Some(Compression::None),
            "lz4" => Some(Compression::Lz4),
            "zstd" => Some(Compression::Zstd {
                level: ZSTD_DEFAULT_LEVEL,
            }),
            other => {
                let level = other.strip_prefix("zstd")?;
                let level = level.strip_prefix(':').unwrap_or(level);
                level.parse().ok().map(|level| Compression::Zstd { level })
            }
        }
    }
}

/// `none`, `lz4`, `zstd` (level 3) or `zstd<level>`: what [`Compression::parse`] reads back, and
/// what a policy specification can hold (no `:` or `,`).
impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Compression::None => f.write_str("none"),
            Compression::Lz4 => f.write_str("lz4"),
            Compression::Zstd { level } if *level == ZSTD_DEFAULT_LEVEL => f.write_str("zstd"),
            Compression::Zstd { level } => write!(f, "zstd{level}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codecs_read_back_what_they_write() {
        for text in ["none", "lz4", "zstd", "zstd19", "zstd-1"] {
            let codec = Compression::parse(text).unwrap();
            assert_eq!(codec.to_string(), text);
        }
        assert_eq!(
            Compression::parse("zstd:7"),
            Some(Compression::Zstd { level: 7 })
        );
        assert_eq!(Compression::parse("zstd3").unwrap().to_string(), "zstd");
        for bad in ["", "snappy", "zstdx", "lz4:1"] {
            assert_eq!(Compression::parse(bad), None, "{bad}");
        }
    }
}
