//! Declaring a policy's options once: [`policy_options!`](crate::policy_options) turns one list
//! of options (field, builder, type, and either a shared declaration such as
//! [`crate::SIZE_RATIO`] or the option's own kind, default, doc and RocksDB name) into the
//! policy's struct, its registry entry's option list, its constructor from option values, its
//! `Default`, its `with_*` builders, its range checks and what it reports as its options.
//!
//! Values are typed by [`OptionValue`]: how a field's type reads an option's text and shows it
//! again, for the option's [`OptionKind`] (a `u64` is a size or a count by its kind).

use crate::error::PolicyError;
use crate::helpers::{check_bloom, check_positive, check_size_ratio};
use crate::options::{OptionKind, OptionSpec, PolicyConfig};
use crate::policy::CompactionPolicy;
use std::sync::Arc;
use strata_meta::format_size;

/// A type an option's value can have.
pub trait OptionValue: Sized {
    /// Reads `text` (the option's given value or its declared default, `None` when neither is
    /// set) as an option of `kind`; the error says what was expected.
    fn read(kind: OptionKind, text: Option<&str>) -> Result<Self, String>;
    /// The value as the option's text, for [`crate::CompactionPolicy::options`].
    fn show(&self, kind: OptionKind) -> String;
}

fn required<T>(value: Option<T>) -> Result<T, String> {
    value.ok_or_else(|| "set (it has no default)".to_string())
}

impl OptionValue for f64 {
    fn read(_: OptionKind, text: Option<&str>) -> Result<Self, String> {
        let value = required(text)?.trim();
        value
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| OptionKind::Float.describe().to_string())
    }
    fn show(&self, _: OptionKind) -> String {
        self.to_string()
    }
}

impl OptionValue for u64 {
    fn read(kind: OptionKind, text: Option<&str>) -> Result<Self, String> {
        let value = required(text)?;
        let parsed = match kind {
            OptionKind::Size => strata_meta::parse_size(value).ok(),
            _ => value.trim().parse().ok(),
        };
        parsed.ok_or_else(|| kind.describe().to_string())
    }
    fn show(&self, kind: OptionKind) -> String {
        match kind {
            OptionKind::Size => format_size(*self),
            _ => self.to_string(),
        }
    }
}

impl OptionValue for usize {
    fn read(kind: OptionKind, text: Option<&str>) -> Result<Self, String> {
        let value = u64::read(kind, text)?;
        usize::try_from(value).map_err(|_| "an integer that fits this machine's usize".to_string())
    }
    fn show(&self, kind: OptionKind) -> String {
        (*self as u64).show(kind)
    }
}

impl OptionValue for u32 {
    fn read(kind: OptionKind, text: Option<&str>) -> Result<Self, String> {
        let value = u64::read(kind, text)?;
        u32::try_from(value).map_err(|_| format!("{value} is above {}", u32::MAX))
    }
    fn show(&self, kind: OptionKind) -> String {
        u64::from(*self).show(kind)
    }
}

impl OptionValue for bool {
    fn read(_: OptionKind, text: Option<&str>) -> Result<Self, String> {
        match required(text)?.trim() {
            "true" | "yes" | "on" | "1" => Ok(true),
            "false" | "no" | "off" | "0" => Ok(false),
            _ => Err(OptionKind::Bool.describe().to_string()),
        }
    }
    fn show(&self, _: OptionKind) -> String {
        self.to_string()
    }
}

/// An option whose default is derived from others (declared with an empty default): `None`
/// unless given.
impl<T: OptionValue> OptionValue for Option<T> {
    fn read(kind: OptionKind, text: Option<&str>) -> Result<Self, String> {
        text.map(|t| T::read(kind, Some(t))).transpose()
    }
    fn show(&self, kind: OptionKind) -> String {
        self.as_ref().map_or_else(String::new, |v| v.show(kind))
    }
}

impl PolicyConfig {
    /// Option `name` as a `T`: the value given, else the declared default, checked by the
    /// ranges every declaration of that kind or name keeps ([`check_declared`]).
    pub fn get<T: OptionValue + Checked>(&self, name: &str) -> Result<T, PolicyError> {
        let spec = self.spec(name)?;
        let text = self.text(name)?;
        let value = T::read(spec.kind, text).map_err(|expected| PolicyError::BadOptionValue {
            policy: self.policy_name().to_string(),
            option: name.to_string(),
            value: text.unwrap_or_default().to_string(),
            expected,
        })?;
        value.check(spec)?;
        Ok(value)
    }
}

/// The ranges shared options keep wherever they are declared: a size ratio above 1, Bloom bits
/// from 0 to 64, and every size above 0.
pub trait Checked {
    /// Checks the value against `spec`'s range.
    fn check(&self, spec: &OptionSpec) -> Result<(), PolicyError>;
}

/// The range of a declared option of this name and kind, checked on `value`: the checks of
/// [`crate::helpers`], applied wherever the option is declared.
pub fn check_declared(spec: &OptionSpec, value: f64) -> Result<(), PolicyError> {
    match spec.name {
        "size_ratio" => check_size_ratio(value),
        "bloom_bits_per_key" => check_bloom(value),
        _ if spec.kind == OptionKind::Size => check_positive(spec.name, value as u64),
        _ => Ok(()),
    }
}

impl Checked for f64 {
    fn check(&self, spec: &OptionSpec) -> Result<(), PolicyError> {
        check_declared(spec, *self)
    }
}

impl Checked for u64 {
    fn check(&self, spec: &OptionSpec) -> Result<(), PolicyError> {
        check_declared(spec, *self as f64)
    }
}

impl Checked for usize {
    fn check(&self, spec: &OptionSpec) -> Result<(), PolicyError> {
        check_declared(spec, *self as f64)
    }
}

impl Checked for u32 {
    fn check(&self, spec: &OptionSpec) -> Result<(), PolicyError> {
        check_declared(spec, f64::from(*self))
    }
}

impl Checked for bool {
    fn check(&self, _: &OptionSpec) -> Result<(), PolicyError> {
        Ok(())
    }
}

impl<T: Checked> Checked for Option<T> {
    fn check(&self, spec: &OptionSpec) -> Result<(), PolicyError> {
        self.as_ref().map_or(Ok(()), |v| v.check(spec))
    }
}

/// A policy declared with [`policy_options!`](crate::policy_options), as the registry builds it
/// ([`build`]).
pub trait DeclaredPolicy: Sized {
    /// Every option read from `config` and range-checked (the macro's `from_config`).
    fn read(config: &PolicyConfig) -> Result<Self, PolicyError>;
    /// What the declarations cannot check, such as how options fit together: the function named
    /// after `checked by` in the declaration, or nothing.
    fn check_together(&self) -> Result<(), PolicyError>;
}

/// The registry's constructor of a declared policy ([`crate::PolicyRegistration::build`]):
/// `build::<Tiered>` reads and checks every option, then checks them together.
pub fn build<P: DeclaredPolicy + CompactionPolicy + 'static>(
    config: &PolicyConfig,
) -> Result<Arc<dyn CompactionPolicy>, PolicyError> {
    let policy = P::read(config)?;
    policy.check_together()?;
    Ok(Arc::new(policy))
}

/// Declares a policy's options once and derives the rest from the list. Each entry is
///
/// - `field, with_field: Type = SHARED`, an option declared for every policy that has it
///   ([`crate::SIZE_RATIO`], [`crate::WRITE_BUFFER_SIZE`], [`crate::TARGET_FILE_SIZE`],
///   [`crate::BLOOM_BITS_PER_KEY`]), or
/// - `field, with_field: Type = Kind("default", "one line of doc")`, optionally followed by
///   `rocksdb "name"`: the policy's own option of [`OptionKind`] `Kind` (an empty default means
///   "derived from other options"; its type is then an `Option`).
///
/// After the struct's closing brace, `checked by path` names a function `fn(&Self) ->
/// Result<(), PolicyError>` for what the declarations cannot check (options against each other).
///
/// It generates the struct with those fields, and on it `OPTIONS` (the registry's option list,
/// in the order written), `from_config` (every option read, typed and range-checked, naming the
/// option in errors), `Default` (the declared defaults), one `with_*` builder per option, and
/// `check_options` (the same checks on a value set by a builder), `declared_options` (each
/// option's value as text, what
/// [`crate::CompactionPolicy::options`] reports), and [`DeclaredPolicy`], so that the registry
/// entry's constructor is [`build`]`::<Policy>`.
#[macro_export]
macro_rules! policy_options {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident { $($entries:tt)* } $(checked by $check:path)?
    ) => {
        $crate::policy_options!(@munch [$(#[$meta])* $vis $name [$($check)?]] [] $($entries)*);
    };
    // An option of the policy's own.
    (@munch $head:tt [$($done:tt)*]
        $field:ident, $with:ident : $ty:ty = $kind:ident($default:literal, $doc:literal)
        $(rocksdb $rocksdb:literal)? $(, $($rest:tt)*)?
    ) => {
        $crate::policy_options!(@munch $head [$($done)* {
            $field, $with, $ty,
            $crate::OptionSpec {
                name: stringify!($field),
                kind: $crate::OptionKind::$kind,
                default: $default,
                rocksdb: $crate::policy_options!(@rocksdb $($rocksdb)?),
                doc: $doc,
            },
            concat!(
                "Sets `", stringify!($field), "`: ", $doc,
                $crate::policy_options!(@rocksdb_doc $($rocksdb)?),
                " Default: ", $default, "."
            )
        }] $($($rest)*)?);
    };
    // An option declared for every policy that has it.
    (@munch $head:tt [$($done:tt)*]
        $field:ident, $with:ident : $ty:ty = $shared:ident $(, $($rest:tt)*)?
    ) => {
        $crate::policy_options!(@munch $head [$($done)* {
            $field, $with, $ty, $crate::$shared,
            concat!("Sets `", stringify!($field), "`; see [`", stringify!($shared),
                "`](", "crate::", stringify!($shared), ") for its meaning, RocksDB name and default.")
        }] $($($rest)*)?);
    };
    (@check $policy:ident) => { Ok(()) };
    (@check $policy:ident $check:path) => { $check($policy) };
    (@rocksdb) => { None };
    (@rocksdb $rocksdb:literal) => { Some($rocksdb) };
    (@rocksdb_doc) => { "" };
    (@rocksdb_doc $rocksdb:literal) => { concat!(" RocksDB: `", $rocksdb, "`.") };
    (@munch [$(#[$meta:meta])* $vis:vis $name:ident [$($check:path)?]]
        [$({ $field:ident, $with:ident, $ty:ty, $spec:expr, $builder_doc:expr })*]
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $($field: $ty,)*
        }

        impl $name {
            /// Every option, as the registry lists them.
            pub const OPTIONS: &'static [$crate::OptionSpec] = &[$($spec),*];

            /// Every option read from `config` (the value given, else the declared default),
            /// typed and range-checked.
            pub fn from_config(config: &$crate::PolicyConfig) -> Result<Self, $crate::PolicyError> {
                Ok($name {
                    $($field: config.get(stringify!($field))?,)*
                })
            }

            /// Checks every option against its declared range, as `from_config` does on reading
            /// (for a policy made with the builders).
            pub fn check_options(&self) -> Result<(), $crate::PolicyError> {
                let mut specs = Self::OPTIONS.iter();
                $(
                    if let Some(spec) = specs.next() {
                        $crate::declare::Checked::check(&self.$field, spec)?;
                    }
                )*
                Ok(())
            }

            /// Each option's value as text, in the declared order.
            pub fn declared_options(&self) -> Vec<(&'static str, String)> {
                let mut kinds = Self::OPTIONS.iter().map(|o| o.kind);
                let mut out = Vec::new();
                $(
                    let kind = kinds.next().unwrap_or($crate::OptionKind::Text);
                    out.push((
                        stringify!($field),
                        $crate::declare::OptionValue::show(&self.$field, kind),
                    ));
                )*
                out
            }

            $(
                #[doc = $builder_doc]
                pub fn $with(mut self, value: $ty) -> Self {
                    self.$field = value;
                    self
                }
            )*
        }

        impl $crate::declare::DeclaredPolicy for $name {
            fn read(config: &$crate::PolicyConfig) -> Result<Self, $crate::PolicyError> {
                Self::from_config(config)
            }

            fn check_together(&self) -> Result<(), $crate::PolicyError> {
                $crate::policy_options!(@check self $($check)?)
            }
        }

        impl Default for $name {
            /// The declared defaults.
            fn default() -> Self {
                let config = $crate::PolicyConfig::defaults(stringify!($name), Self::OPTIONS);
                // The registry's tests build every policy from its declared defaults.
                Self::from_config(&config)
                    .unwrap_or_else(|e| panic!("{}'s declared defaults: {e}", stringify!($name)))
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use crate::PolicyConfig;

    crate::policy_options! {
        /// A policy's options, as the macro declares them.
        #[derive(Clone, Debug, PartialEq)]
        pub struct Example {
            size_ratio, with_size_ratio: f64 = SIZE_RATIO,
            runs, with_runs: usize = Integer("4", "runs per level"),
            cap, with_cap: Option<u64> = Size("", "a cap derived from the buffer unless given")
                rocksdb "max_bytes_for_level_base",
            target_file_size, with_target_file_size: u64 = TARGET_FILE_SIZE,
        }
    }

    #[test]
    fn one_declaration_gives_the_spec_defaults_builders_checks_and_the_text() {
        let names: Vec<&str> = Example::OPTIONS.iter().map(|o| o.name).collect();
        assert_eq!(names, ["size_ratio", "runs", "cap", "target_file_size"]);
        assert_eq!(
            Example::OPTIONS[2].rocksdb,
            Some("max_bytes_for_level_base")
        );
        let plain = Example::default();
        assert_eq!(
            (
                plain.size_ratio,
                plain.runs,
                plain.cap,
                plain.target_file_size
            ),
            (10.0, 4, None, 64 << 20)
        );
        let built = Example::default()
            .with_runs(6)
            .with_cap(Some(1 << 20))
            .with_size_ratio(10.0)
            .with_target_file_size(64 << 20);
        assert_eq!(
            built.declared_options(),
            [
                ("size_ratio", "10".to_string()),
                ("runs", "6".to_string()),
                ("cap", "1MiB".to_string()),
                ("target_file_size", "64MiB".to_string()),
            ]
        );
        // Given values are read with the option's kind and checked by its range.
        let config = |values: &[(&str, &str)]| {
            let mut config = PolicyConfig::defaults("example", Example::OPTIONS);
            for (k, v) in values {
                config = config.with_value(k, v);
            }
            config
        };
        let read = Example::from_config(&config(&[("cap", "2MiB"), ("runs", "3")])).unwrap();
        assert_eq!((read.cap, read.runs), (Some(2 << 20), 3));
        let e = Example::from_config(&config(&[("size_ratio", "1")])).unwrap_err();
        assert!(e.to_string().contains("size_ratio"), "{e}");
        let e = Example::from_config(&config(&[("target_file_size", "0")])).unwrap_err();
        assert!(e.to_string().contains("target_file_size"), "{e}");
        let e = Example::from_config(&config(&[("runs", "many")])).unwrap_err();
        assert!(
            e.to_string().contains("runs") && e.to_string().contains("integer"),
            "{e}"
        );
        // The builders' values are checked the same way.
        assert!(Example::default().check_options().is_ok());
        let e = Example::default()
            .with_size_ratio(0.5)
            .check_options()
            .unwrap_err();
        assert!(e.to_string().contains("size_ratio"), "{e}");
        // Every built-in policy's registered options build it from their defaults.
        for registration in crate::registry::registered() {
            let policy = (registration.build)(&PolicyConfig::defaults(
                registration.name,
                registration.options,
            ))
            .unwrap();
            assert_eq!(policy.name(), registration.name);
        }
    }
}
