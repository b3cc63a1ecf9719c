//! Declaring a policy for the registry: the options it takes ([`OptionSpec`]), the values its
//! constructor receives ([`PolicyConfig`]), and the registration itself
//! ([`PolicyRegistration`]).

use crate::error::PolicyError;
use crate::policy::CompactionPolicy;
use std::collections::BTreeMap;
use std::sync::Arc;
use strata_meta::parse_size;

/// The type of an option's value.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum OptionKind {
    /// A decimal number, e.g. `10` or `4.5`.
    Float,
    /// A non-negative integer.
    Integer,
    /// A byte size: a number with an optional unit (`B`, `KiB`, `MiB`, `GiB`, `TiB`).
    Size,
    /// `true` or `false`.
    Bool,
    /// Free text the policy interprets (its doc line says which values it takes).
    Text,
}

impl OptionKind {
    /// How the type reads in listings and errors.
    pub fn describe(self) -> &'static str {
        match self {
            OptionKind::Float => "a number",
            OptionKind::Integer => "a non-negative integer",
            OptionKind::Size => "a size such as 64MiB",
            OptionKind::Bool => "true or false",
            OptionKind::Text => "text",
        }
    }

    /// Short name for tables.
    pub fn name(self) -> &'static str {
        match self {
            OptionKind::Float => "float",
            OptionKind::Integer => "integer",
            OptionKind::Size => "size",
            OptionKind::Bool => "bool",
            OptionKind::Text => "text",
        }
    }

    /// Checks that `value` parses as this type.
    pub(crate) fn check(self, value: &str) -> bool {
        match self {
            OptionKind::Float => value.trim().parse::<f64>().is_ok_and(f64::is_finite),
            OptionKind::Integer => value.trim().parse::<u64>().is_ok(),
            OptionKind::Size => parse_size(value).is_ok(),
            OptionKind::Bool => parse_bool(value).is_some(),
            OptionKind::Text => true,
        }
    }
}

fn parse_bool(value: &str) -> Option<bool> {
    match value.trim() {
        "true" | "yes" | "on" | "1" => Some(true),
        "false" | "no" | "off" | "0" => Some(false),
        _ => None,
    }
}

/// One option a policy declares.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct OptionSpec {
    /// The option's name (snake_case; RocksDB's name where there is one).
    pub name: &'static str,
    /// Its type.
    pub kind: OptionKind,
    /// The default, as text of that type; empty when the default is derived from other options
    /// (the doc line says how).
    pub default: &'static str,
    /// The RocksDB option it corresponds to, if any.
    pub rocksdb: Option<&'static str>,
    /// One line saying what it does.
    pub doc: &'static str,
}

/// Option values handed to a policy's constructor: what the specification set, or else the
/// declared default. Getters name the option in their errors.
#[derive(Clone, Debug)]
pub struct PolicyConfig {
    policy: &'static str,
    options: &'static [OptionSpec],
    values: BTreeMap<String, String>,
}

impl PolicyConfig {
    /// Values for `registration`'s options; the caller has checked that each is declared and
    /// parses as its type.
    pub(crate) fn new(registration: &PolicyRegistration, values: BTreeMap<String, String>) -> Self {
        PolicyConfig {
            policy: registration.name,
            options: registration.options,
            values,
        }
    }

    /// Values for `options` with none given: every option at its declared default (what a
    /// policy's `Default` reads).
    pub fn defaults(policy: &'static str, options: &'static [OptionSpec]) -> Self {
        PolicyConfig {
            policy,
            options,
            values: BTreeMap::new(),
        }
    }

    /// The same values with option `name` given as `value` (text of its type, checked when
    /// read).
    pub fn with_value(mut self, name: &str, value: &str) -> Self {
        self.values.insert(name.to_string(), value.to_string());
        self
    }

    /// The policy these values are for.
    pub fn policy_name(&self) -> &'static str {
        self.policy
    }

    /// The declaration of option `name`.
    pub(crate) fn spec(&self, name: &str) -> Result<&'static OptionSpec, PolicyError> {
        self.options
            .iter()
            .find(|o| o.name == name)
            .ok_or_else(|| unknown_option(self.policy, self.options, name))
    }

    /// The text of option `name` (given or default), or `None` when neither is set.
    pub fn text(&self, name: &str) -> Result<Option<&str>, PolicyError> {
        let spec = self.spec(name)?;
        let value = self
            .values
            .get(name)
            .map(String::as_str)
            .unwrap_or(spec.default);
        Ok((!value.is_empty()).then_some(value))
    }

    /// Whether the specification set option `name` (as opposed to its default).
    pub fn is_set(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }

    fn parsed<T>(
        &self,
        name: &str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<Option<T>, PolicyError> {
        let spec = self.spec(name)?;
        match self.text(name)? {
            None => Ok(None),
            Some(text) => parse(text)
                .map(Some)
                .ok_or_else(|| PolicyError::BadOptionValue {
                    policy: self.policy.to_string(),
                    option: name.to_string(),
                    value: text.to_string(),
                    expected: spec.kind.describe().to_string(),
                }),
        }
    }

    fn required<T>(&self, name: &str, value: Option<T>) -> Result<T, PolicyError> {
        value.ok_or_else(|| PolicyError::BadOptionValue {
            policy: self.policy.to_string(),
            option: name.to_string(),
            value: String::new(),
            expected: "set (it has no default)".to_string(),
        })
    }

    /// A float option, or `None` when it has no value.
    pub fn opt_f64(&self, name: &str) -> Result<Option<f64>, PolicyError> {
        self.parsed(name, |t| {
            t.trim().parse::<f64>().ok().filter(|v| v.is_finite())
        })
    }

    /// An integer option, or `None` when it has no value.
    pub fn opt_u64(&self, name: &str) -> Result<Option<u64>, PolicyError> {
        self.parsed(name, |t| t.trim().parse::<u64>().ok())
    }

    /// A size option in bytes, or `None` when it has no value.
    pub fn opt_size(&self, name: &str) -> Result<Option<u64>, PolicyError> {
        self.parsed(name, |t| parse_size(t).ok())
    }

    /// A boolean option, or `None` when it has no value.
    pub fn opt_bool(&self, name: &str) -> Result<Option<bool>, PolicyError> {
        self.parsed(name, parse_bool)
    }

    /// A float option that must have a value.
    pub fn f64(&self, name: &str) -> Result<f64, PolicyError> {
        let v = self.opt_f64(name)?;
        self.required(name, v)
    }

    /// An integer option that must have a value.
    pub fn u64(&self, name: &str) -> Result<u64, PolicyError> {
        let v = self.opt_u64(name)?;
        self.required(name, v)
    }

    /// An integer option that must have a value, as a `usize`.
    pub fn usize(&self, name: &str) -> Result<usize, PolicyError> {
        let v = self.u64(name)?;
        usize::try_from(v).map_err(|_| PolicyError::BadOptionValue {
            policy: self.policy.to_string(),
            option: name.to_string(),
            value: v.to_string(),
            expected: "an integer that fits this machine's usize".to_string(),
        })
    }

    /// A size option that must have a value.
    pub fn size(&self, name: &str) -> Result<u64, PolicyError> {
        let v = self.opt_size(name)?;
        self.required(name, v)
    }

    /// A boolean option that must have a value.
    pub fn bool(&self, name: &str) -> Result<bool, PolicyError> {
        let v = self.opt_bool(name)?;
        self.required(name, v)
    }
}

pub(crate) fn unknown_option(policy: &str, options: &[OptionSpec], name: &str) -> PolicyError {
    PolicyError::UnknownOption {
        policy: policy.to_string(),
        option: name.to_string(),
        known: options
            .iter()
            .map(|o| o.name)
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// A constructor from option values.
pub type BuildFn = fn(&PolicyConfig) -> Result<Arc<dyn CompactionPolicy>, PolicyError>;

/// What a policy registers: its name, summary, options and constructor.
#[derive(Copy, Clone, Debug)]
pub struct PolicyRegistration {
    /// The name it is selected by (what [`CompactionPolicy::name`] returns).
    pub name: &'static str,
    /// One line saying what it does.
    pub summary: &'static str,
    /// Every option it takes.
    pub options: &'static [OptionSpec],
    /// Builds the policy, validating the options.
    pub build: BuildFn,
}

impl PolicyRegistration {
    /// Whether the policy declares option `name`.
    pub fn has_option(&self, name: &str) -> bool {
        self.options.iter().any(|o| o.name == name)
    }

    /// Whether the policy takes option `name`: declares it, or takes it as every policy does
    /// ([`EVERY_POLICY`]).
    pub fn takes_option(&self, name: &str) -> bool {
        self.has_option(name) || EVERY_POLICY.iter().any(|o| o.name == name)
    }
}

/// How Bloom bits are spread over levels ([`crate::bloom`]). Every policy takes it, declared or
/// not: the registry applies it around the policy it builds. A policy declares it only to change
/// the default.
pub const BLOOM_LAYOUT: OptionSpec = OptionSpec {
    name: "bloom_layout",
    kind: OptionKind::Text,
    default: "uniform",
    rocksdb: None,
    doc: "uniform: every output gets bloom_bits_per_key; dynamic: that average spread over levels by occupancy (Monkey-style)",
};

/// The codec of each level's outputs ([`crate::compression`]). Every policy takes it, like
/// `bloom_layout`.
pub const COMPRESSION_PER_LEVEL: OptionSpec = OptionSpec {
    name: crate::compression::COMPRESSION_PER_LEVEL,
    kind: OptionKind::Text,
    default: "",
    rocksdb: Some("compression_per_level"),
    doc: "codecs of levels 0, 1, ... separated by '/' (none, lz4, zstd, zstd<level>), the last for every deeper level; empty: the engine's compression",
};

/// The codec of compaction outputs no data lies below ([`crate::compression`]). Every policy
/// takes it, like `bloom_layout`.
pub const BOTTOMMOST_COMPRESSION: OptionSpec = OptionSpec {
    name: crate::compression::BOTTOMMOST_COMPRESSION,
    kind: OptionKind::Text,
    default: "",
    rocksdb: Some("bottommost_compression"),
    doc: "codec of compaction outputs with no data below them, over compression_per_level; empty: the level's codec",
};

/// The options every policy takes, declared or not: the registry applies them around the
/// policy it builds. A policy declares one only to change its default.
pub const EVERY_POLICY: [OptionSpec; 3] =
    [BLOOM_LAYOUT, COMPRESSION_PER_LEVEL, BOTTOMMOST_COMPRESSION];

/// Size ratio T, declared the same way by every policy that has one: a number above 1, default
/// 10. RocksDB: `max_bytes_for_level_multiplier`.
pub const SIZE_RATIO: OptionSpec = OptionSpec {
    name: "size_ratio",
    kind: OptionKind::Float,
    default: "10",
    rocksdb: Some("max_bytes_for_level_multiplier"),
    doc: "size ratio T between adjacent levels (runs per level for tiering)",
};

/// Buffer size B, for policies whose capacities are multiples of it: default 64 MiB. RocksDB:
/// `write_buffer_size`. The engine and the simulator offer their own buffer size as this
/// option's value when it is not set.
pub const WRITE_BUFFER_SIZE: OptionSpec = OptionSpec {
    name: "write_buffer_size",
    kind: OptionKind::Size,
    default: "64MiB",
    rocksdb: Some("write_buffer_size"),
    doc: "buffer size B the level capacities are computed from",
};

/// Output table size: above 0, default 64 MiB. RocksDB: `target_file_size_base`.
pub const TARGET_FILE_SIZE: OptionSpec = OptionSpec {
    name: "target_file_size",
    kind: OptionKind::Size,
    default: "64MiB",
    rocksdb: Some("target_file_size_base"),
    doc: "size at which output is cut into a new table",
};

/// Bloom filter bits per key of written tables: 0 (no filter) to 64, default 10. RocksDB: the
/// `bits_per_key` of `NewBloomFilterPolicy`.
pub const BLOOM_BITS_PER_KEY: OptionSpec = OptionSpec {
    name: "bloom_bits_per_key",
    kind: OptionKind::Float,
    default: "10",
    rocksdb: Some("bits_per_key of NewBloomFilterPolicy"),
    doc: "Bloom filter bits per key of the tables the policy writes (0: no filter)",
};
