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
        /// The size of a dictionary trained for each table on its own data blocks (0: none).
        /// Small blocks of similar records share most of their patterns, which a block
        /// compressed alone cannot exploit; the dictionary carries them once per table. RocksDB:
        /// `CompressionOptions::max_dict_bytes`, with `zstd_max_train_bytes` at
        /// [`ZSTD_TRAIN_FACTOR`] times it.
        max_dict_bytes: u32,
    },
}

/// zstd's own default level, what `zstd` without a level means.
pub const ZSTD_DEFAULT_LEVEL: i32 = 3;

/// Bytes of data blocks a table's dictionary is trained on, per byte of dictionary: zstd's own
/// advice (its `ZDICT_trainFromBuffer` documentation) is about 100 times the dictionary.
pub const ZSTD_TRAIN_FACTOR: u32 = 100;

/// The smallest dictionary: zstd refuses to train one below 256 bytes (`ZDICT_DICTSIZE_MIN`).
pub const MIN_DICT_BYTES: u32 = 256;

/// The largest dictionary. A table holds back up to [`ZSTD_TRAIN_FACTOR`] times its dictionary
/// of data blocks until it is trained, so this bounds what one table being written holds in
/// memory (100 MiB; RocksDB's usual settings are 16–64 KiB of dictionary).
pub const MAX_DICT_BYTES: u32 = 1 << 20;

impl Compression {
    /// Zstandard at `level` without a dictionary.
    pub const fn zstd(level: i32) -> Compression {
        Compression::Zstd {
            level,
            max_dict_bytes: 0,
        }
    }

    /// The dictionary each table trains, in bytes (0: none, and for every other codec).
    pub fn max_dict_bytes(&self) -> u32 {
        match self {
            Compression::Zstd { max_dict_bytes, .. } => *max_dict_bytes,
            _ => 0,
        }
    }
}

impl Compression {
    /// Parses `none`, `lz4`, `zstd` (level 3) or `zstd` followed by a level: `zstd19`,
    /// `zstd-1`, or `zstd:19`; a Zstandard codec may end in `+dict<size>` for a dictionary
    /// per table (`zstd+dict16KiB`, sizes as `strata_meta::parse_size` reads them, from
    /// [`MIN_DICT_BYTES`] to [`MAX_DICT_BYTES`]).
    pub fn parse(text: &str) -> Option<Compression> {
        let text = text.trim();
        let (codec, dictionary) = match text.split_once("+dict") {
            Some((codec, size)) => (codec, Some(size)),
            None => (text, None),
        };
        let max_dict_bytes = match dictionary {
            None => 0,
            Some(size) => strata_meta::parse_size(size)
                .ok()
                .and_then(|bytes| u32::try_from(bytes).ok())
                .filter(|bytes| (MIN_DICT_BYTES..=MAX_DICT_BYTES).contains(bytes))?,
        };
        match codec {
            "none" if dictionary.is_none() => Some(Compression::None),
            "lz4" if dictionary.is_none() => Some(Compression::Lz4),
            "zstd" => Some(Compression::Zstd {
                level: ZSTD_DEFAULT_LEVEL,
                max_dict_bytes,
            }),
            other => {
                let level = other.strip_prefix("zstd")?;
                let level = level.strip_prefix(':').unwrap_or(level);
                level.parse().ok().map(|level| Compression::Zstd {
                    level,
                    max_dict_bytes,
                })
            }
        }
    }
}

/// `none`, `lz4`, `zstd` (level 3) or `zstd<level>`, then `+dict<size>` for a dictionary: what
/// [`Compression::parse`] reads back, and what a policy specification can hold (no `:` or `,`).
impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Compression::None => f.write_str("none"),
            Compression::Lz4 => f.write_str("lz4"),
            Compression::Zstd {
                level,
                max_dict_bytes,
            } => {
                f.write_str("zstd")?;
                if level != ZSTD_DEFAULT_LEVEL {
                    write!(f, "{level}")?;
                }
                if max_dict_bytes > 0 {
                    let size = strata_meta::format_size(u64::from(max_dict_bytes));
                    write!(f, "+dict{size}")?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codecs_read_back_what_they_write() {
        for text in [
            "none",
            "lz4",
            "zstd",
            "zstd19",
            "zstd-1",
            "zstd+dict16KiB",
            "zstd19+dict1000",
        ] {
            let codec = Compression::parse(text).unwrap();
            assert_eq!(codec.to_string(), text);
        }
        assert_eq!(Compression::parse("zstd:7"), Some(Compression::zstd(7)));
        assert_eq!(
            Compression::parse("zstd:7+dict64k"),
            Some(Compression::Zstd {
                level: 7,
                max_dict_bytes: 65536
            })
        );
        assert_eq!(Compression::parse("zstd3").unwrap().to_string(), "zstd");
        for bad in [
            "",
            "snappy",
            "zstdx",
            "lz4:1",
            "lz4+dict16K",
            "zstd+dict",
            "zstd+dict100",
            "zstd+dict2MiB",
            "zstd+dictx",
        ] {
            assert_eq!(Compression::parse(bad), None, "{bad}");
        }
    }
}
