//! The policy registry: every policy selectable by name, with the options it takes.
//!
//! A policy registers a [`PolicyRegistration`]: its name, a one-line summary, the options it
//! declares ([`OptionSpec`]: name, type, default, RocksDB equivalent, doc line) and a constructor
//! from option values. The command-line tool (`strata sim`, `strata bench`), the engine
//! (`Options::with_policy_named`), workload files and the data-driven tests all build policies
//! through [`build_policy`], so an option exists in one place: the policy's declaration.
//!
//! Policies are named by a [`PolicySpec`]: `name`, or `name:option=value,option=value` (options
//! may also be separated by `:`). The built-in policies are always registered; a policy written
//! outside this crate calls [`register`] once at start-up and is then selectable everywhere, like
//! `examples/custom-policy` does.

use crate::adjust::AdjustedOutputs;
use crate::bloom::{BloomLayout, DynamicBits};
use crate::compression::LevelCodecs;
use crate::error::PolicyError;
use crate::options::{
    unknown_option, OptionSpec, PolicyConfig, PolicyRegistration, BLOOM_LAYOUT,
    BOTTOMMOST_COMPRESSION, COMPRESSION_PER_LEVEL, EVERY_POLICY,
};
use crate::policy::CompactionPolicy;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, OnceLock, RwLock};

/// The built-in policies, in the order reports list them. Adding a built-in policy adds one line
/// here.
const BUILTIN: &[PolicyRegistration] = &[
    crate::builtin::leveled::REGISTRATION,
    crate::builtin::leveled_full::REGISTRATION,
    crate::builtin::tiered::REGISTRATION,
    crate::builtin::lazy_leveled::REGISTRATION,
    crate::builtin::horizontal::LEVELED_REGISTRATION,
    crate::builtin::horizontal::TIERED_REGISTRATION,
    crate::builtin::spooky::REGISTRATION,
    crate::builtin::spooky::LAZY_REGISTRATION,
    crate::builtin::spooky::LAZY_PARTIAL_REGISTRATION,
    crate::builtin::spooky::TIERED_REGISTRATION,
    crate::builtin::vertiorizon::REGISTRATION,
    crate::builtin::vertiorizon::LAZY_REGISTRATION,
    crate::builtin::partial::FULL_REGISTRATION,
    crate::builtin::partial::RR_REGISTRATION,
    crate::builtin::partial::CHOOSEBEST_REGISTRATION,
    crate::builtin::partial::MIXED_REGISTRATION,
    crate::builtin::partial::FULL_PRESERVING_REGISTRATION,
    crate::builtin::partial::RR_PRESERVING_REGISTRATION,
    crate::builtin::partial::CHOOSEBEST_PRESERVING_REGISTRATION,
    crate::builtin::partial::MIXED_PRESERVING_REGISTRATION,
    crate::builtin::ecotune::REGISTRATION,
    crate::builtin::minmax::REGISTRATION,
];

fn extra() -> &'static RwLock<Vec<PolicyRegistration>> {
    static EXTRA: OnceLock<RwLock<Vec<PolicyRegistration>>> = OnceLock::new();
    EXTRA.get_or_init(|| RwLock::new(Vec::new()))
}

/// Registers a policy written outside this crate, for this process. Fails if the name is taken.
pub fn register(registration: PolicyRegistration) -> Result<(), PolicyError> {
    let mut extra = extra()
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if BUILTIN
        .iter()
        .chain(extra.iter())
        .any(|r| r.name == registration.name)
    {
        return Err(PolicyError::DuplicatePolicy(registration.name.to_string()));
    }
    extra.push(registration);
    Ok(())
}

/// Names of the built-in policies, in the order reports list them.
pub fn builtin_names() -> Vec<&'static str> {
    BUILTIN.iter().map(|r| r.name).collect()
}

/// Every registered policy: the built-in ones, then those added with [`register`].
pub fn registered() -> Vec<PolicyRegistration> {
    let extra = extra()
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    BUILTIN.iter().chain(extra.iter()).copied().collect()
}

/// The registration of policy `name`.
pub fn lookup(name: &str) -> Result<PolicyRegistration, PolicyError> {
    let all = registered();
    all.iter()
        .find(|r| r.name == name)
        .copied()
        .ok_or_else(|| PolicyError::UnknownPolicy {
            name: name.to_string(),
            known: all.iter().map(|r| r.name).collect::<Vec<_>>().join(", "),
        })
}

/// A policy and the options it is built with: `name` or `name:option=value,option=value`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PolicySpec {
    /// The policy's name.
    pub name: String,
    /// Options in the order given; a later value of the same option wins.
    pub options: Vec<(String, String)>,
}

impl PolicySpec {
    /// A policy with no options set.
    pub fn new(name: impl Into<String>) -> Self {
        PolicySpec {
            name: name.into(),
            options: Vec::new(),
        }
    }

    /// The same specification with `option = value` set.
    pub fn with(mut self, option: impl Into<String>, value: impl ToString) -> Self {
        self.options.push((option.into(), value.to_string()));
        self
    }

    /// The specification that builds `policy` again: its name and the options it reports that
    /// it declares, with values of the declared type (a policy also reports values it derives,
    /// such as a computed level count, and describes an unset option in words, such as
    /// "measured"). What a database records when it is handed to a policy, so that it reopens
    /// with the same one. An unregistered policy's specification keeps every reported option.
    pub fn of(policy: &dyn CompactionPolicy) -> Self {
        let declared = lookup(policy.name()).ok().map(|r| r.options);
        let settable = |name: &str, value: &str| {
            // Every policy takes these, declared or not (see `build_policy`).
            EVERY_POLICY.iter().any(|o| o.name == name)
                || declared.as_ref().is_none_or(|options| {
                    options
                        .iter()
                        .any(|o| o.name == name && o.kind.check(value))
                })
        };
        PolicySpec {
            name: policy.name().to_string(),
            options: policy
                .options()
                .into_iter()
                .filter(|(k, v)| settable(k, v))
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        }
    }

    /// Whether option `name` is set.
    pub fn is_set(&self, name: &str) -> bool {
        self.options.iter().any(|(k, _)| k == name)
    }

    /// Sets each of `defaults` that the policy takes (declares, or takes as every policy does:
    /// [`crate::EVERY_POLICY`]) and the specification does not set yet. Other options are skipped: defaults are offered to every policy
    /// (e.g. the engine's write buffer size), and each takes the ones it has.
    pub fn fill_defaults<K: AsRef<str>, V: ToString>(
        &mut self,
        defaults: impl IntoIterator<Item = (K, V)>,
    ) -> Result<(), PolicyError> {
        let registration = lookup(&self.name)?;
        for (name, value) in defaults {
            let name = name.as_ref();
            if registration.takes_option(name) && !self.is_set(name) {
                self.options.push((name.to_string(), value.to_string()));
            }
        }
        Ok(())
    }

    /// Parses a comma-separated list of specifications. A comma-separated item containing `=`
    /// belongs to the specification before it, so `leveled:size_ratio=6,level0_trigger=2,tiered`
    /// is two policies.
    pub fn parse_list(text: &str) -> Result<Vec<PolicySpec>, PolicyError> {
        let mut specs: Vec<PolicySpec> = Vec::new();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match specs.last_mut() {
                Some(last) if item.contains('=') && !item.contains(':') => {
                    last.options.push(parse_option(text, item)?);
                }
                _ => specs.push(item.parse()?),
            }
        }
        if specs.is_empty() {
            return Err(PolicyError::BadSpec {
                spec: text.to_string(),
                reason: "no policy named".to_string(),
            });
        }
        Ok(specs)
    }
}

fn parse_option(spec: &str, item: &str) -> Result<(String, String), PolicyError> {
    let (name, value) = item.split_once('=').ok_or_else(|| PolicyError::BadSpec {
        spec: spec.to_string(),
        reason: format!("{item:?} should look like option=value"),
    })?;
    let name = name.trim();
    if name.is_empty() {
        return Err(PolicyError::BadSpec {
            spec: spec.to_string(),
            reason: format!("{item:?} has no option name"),
        });
    }
    Ok((name.to_string(), value.trim().to_string()))
}

impl FromStr for PolicySpec {
    type Err = PolicyError;

    fn from_str(text: &str) -> Result<Self, PolicyError> {
        let (name, rest) = match text.split_once(':') {
            Some((name, rest)) => (name, Some(rest)),
            None => (text, None),
        };
        let name = name.trim();
        if name.is_empty() || name.contains('=') {
            return Err(PolicyError::BadSpec {
                spec: text.to_string(),
                reason: "it should start with a policy name".to_string(),
            });
        }
        let mut spec = PolicySpec::new(name);
        for item in rest
            .into_iter()
            .flat_map(|r| r.split([',', ':']))
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            spec.options.push(parse_option(text, item)?);
        }
        Ok(spec)
    }
}

impl fmt::Display for PolicySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        for (i, (k, v)) in self.options.iter().enumerate() {
            write!(f, "{}{k}={v}", if i == 0 { ':' } else { ',' })?;
        }
        Ok(())
    }
}

/// Builds the policy `spec` names. Every option set must be declared by the policy and parse as
/// its type; the policy's constructor then checks the values' ranges.
pub fn build_policy(spec: &PolicySpec) -> Result<Arc<dyn CompactionPolicy>, PolicyError> {
    let registration = lookup(&spec.name)?;
    let mut values = BTreeMap::new();
    // The options every policy takes: the spec's value, else the policy's default where it
    // declares one, else the common default.
    let mut every: BTreeMap<&str, &str> = EVERY_POLICY
        .iter()
        .map(|common| {
            let default = registration
                .options
                .iter()
                .find(|o| o.name == common.name)
                .map_or(common.default, |o| o.default);
            (common.name, default)
        })
        .collect();
    for (name, value) in &spec.options {
        if let Some(slot) = every.get_mut(name.as_str()) {
            *slot = value;
            if !registration.has_option(name) {
                continue;
            }
        }
        let option = registration
            .options
            .iter()
            .find(|o| o.name == name)
            .ok_or_else(|| unknown_option(registration.name, registration.options, name))?;
        if !option.kind.check(value) {
            return Err(PolicyError::BadOptionValue {
                policy: registration.name.to_string(),
                option: name.clone(),
                value: value.clone(),
                expected: option.kind.describe().to_string(),
            });
        }
        values.insert(name.clone(), value.clone());
    }
    let bad = |option: &str, value: &str, expected: String| PolicyError::BadOptionValue {
        policy: registration.name.to_string(),
        option: option.to_string(),
        value: value.to_string(),
        expected,
    };
    let layout = every[BLOOM_LAYOUT.name];
    let layout = BloomLayout::parse(layout)
        .ok_or_else(|| bad(BLOOM_LAYOUT.name, layout, "uniform or dynamic".to_string()))?;
    let (per_level, bottommost) = (
        every[COMPRESSION_PER_LEVEL.name],
        every[BOTTOMMOST_COMPRESSION.name],
    );
    let codecs = LevelCodecs::parse(per_level, bottommost).map_err(|(option, why)| {
        let value = if option == COMPRESSION_PER_LEVEL.name {
            per_level
        } else {
            bottommost
        };
        bad(option, value, why)
    })?;
    let policy = (registration.build)(&PolicyConfig::new(&registration, values))?;
    let policy = match layout {
        BloomLayout::Uniform => policy,
        BloomLayout::Dynamic => Arc::new(AdjustedOutputs::new(policy, DynamicBits)),
    };
    Ok(if codecs.is_empty() {
        policy
    } else {
        Arc::new(AdjustedOutputs::new(policy, codecs))
    })
}

/// The registered policies and their options as a table (what `strata sim --list-policies`
/// prints).
pub fn describe_policies() -> String {
    let mut out = String::new();
    for r in registered() {
        out.push_str(&format!("{}: {}\n", r.name, r.summary));
        for o in r.options {
            out.push_str(&describe_option(o, "(derived)"));
        }
        out.push('\n');
    }
    out.push_str("every policy also takes:\n");
    for o in &EVERY_POLICY {
        out.push_str(&describe_option(o, "(none)"));
    }
    out
}

/// One line of [`describe_policies`]: `o`'s name, type, default (`unset` when it has none),
/// doc and RocksDB name.
fn describe_option(o: &OptionSpec, unset: &str) -> String {
    let default = if o.default.is_empty() {
        unset
    } else {
        o.default
    };
    let rocksdb = o
        .rocksdb
        .map(|r| format!("; RocksDB: {r}"))
        .unwrap_or_default();
    format!(
        "  {:<26} {:<8} default {:<10} {}{rocksdb}\n",
        o.name,
        o.kind.name(),
        default,
        o.doc
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::OptionKind;

    #[test]
    fn every_builtin_builds_with_its_defaults_and_reports_its_name() {
        for name in builtin_names() {
            let p = build_policy(&PolicySpec::new(name)).unwrap();
            assert_eq!(p.name(), name);
            assert!(!p.options().is_empty());
            // Every declared default parses as its declared type.
            for o in lookup(name).unwrap().options {
                assert!(
                    o.default.is_empty() || o.kind.check(o.default),
                    "{name}.{}: default {:?} is not {}",
                    o.name,
                    o.default,
                    o.kind.describe()
                );
            }
        }
    }

    #[test]
    fn the_specification_of_a_policy_builds_the_same_policy() {
        for name in builtin_names() {
            let mut spec = PolicySpec::new(name);
            spec.fill_defaults([("write_buffer_size", "3MiB"), ("bloom_bits_per_key", "7.5")])
                .unwrap();
            let built = build_policy(&spec).unwrap();
            let recorded: PolicySpec = PolicySpec::of(built.as_ref()).to_string().parse().unwrap();
            let again = build_policy(&recorded).unwrap();
            assert_eq!(again.options(), built.options(), "{name}: {recorded}");
            // The dynamic Bloom layout wraps the policy; its specification says so.
            let dynamic = build_policy(&spec.clone().with("bloom_layout", "dynamic")).unwrap();
            let recorded: PolicySpec = PolicySpec::of(dynamic.as_ref())
                .to_string()
                .parse()
                .unwrap();
            let again = build_policy(&recorded).unwrap();
            assert_eq!(again.options(), dynamic.options(), "{name}: {recorded}");
        }
    }

    #[test]
    fn every_policy_takes_a_bloom_layout() {
        for name in builtin_names() {
            let dynamic =
                build_policy(&PolicySpec::new(name).with("bloom_layout", "dynamic")).unwrap();
            assert_eq!(dynamic.name(), name);
            assert!(dynamic
                .options()
                .contains(&("bloom_layout", "dynamic".to_string())));
            let uniform =
                build_policy(&PolicySpec::new(name).with("bloom_layout", "uniform")).unwrap();
            assert!(!uniform
                .options()
                .contains(&("bloom_layout", "dynamic".to_string())));
        }
        let err = build_policy(&PolicySpec::new("leveled").with("bloom_layout", "monkey"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("bloom_layout") && err.contains("monkey"),
            "{err}"
        );
    }

    #[test]
    fn specs_parse_and_print() {
        let spec: PolicySpec = "leveled:size_ratio=6,level0_trigger=2".parse().unwrap();
        assert_eq!(spec.name, "leveled");
        assert_eq!(
            spec.options,
            vec![
                ("size_ratio".to_string(), "6".to_string()),
                ("level0_trigger".to_string(), "2".to_string())
            ]
        );
        assert_eq!(spec.to_string(), "leveled:size_ratio=6,level0_trigger=2");
        let colon: PolicySpec = "tiered:size_ratio=4:target_file_size=1MiB".parse().unwrap();
        assert_eq!(colon.options.len(), 2);
        let list = PolicySpec::parse_list("leveled:size_ratio=6,level0_trigger=2,tiered").unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].options.len(), 2);
        assert_eq!(list[1], PolicySpec::new("tiered"));
        assert!("".parse::<PolicySpec>().is_err());
        assert!("a=b".parse::<PolicySpec>().is_err());
        assert!("leveled:size_ratio".parse::<PolicySpec>().is_err());
        assert!(PolicySpec::parse_list(" , ").is_err());
    }

    #[test]
    fn bad_names_options_and_values_are_errors_that_name_them() {
        let e = build_policy(&PolicySpec::new("nope")).unwrap_err();
        assert!(e.to_string().contains("leveled, leveled-full"), "{e}");
        let e = build_policy(&PolicySpec::new("leveled").with("fanout", 3)).unwrap_err();
        assert!(
            matches!(&e, PolicyError::UnknownOption { option, .. } if option == "fanout"),
            "{e}"
        );
        assert!(e.to_string().contains("size_ratio"), "{e}");
        let e = build_policy(&PolicySpec::new("tiered").with("size_ratio", "ten")).unwrap_err();
        assert!(matches!(e, PolicyError::BadOptionValue { .. }), "{e}");
        let e = build_policy(&PolicySpec::new("leveled").with("target_file_size", "5 parsecs"))
            .unwrap_err();
        assert!(e.to_string().contains("a size such as 64MiB"), "{e}");
        // Values parse but are out of range: the policy's own validation names the option.
        for name in ["leveled", "leveled-full", "tiered", "lazy-leveled"] {
            assert!(matches!(
                build_policy(&PolicySpec::new(name).with("size_ratio", 1)),
                Err(PolicyError::InvalidOption {
                    option: "size_ratio",
                    ..
                })
            ));
        }
        assert!(build_policy(&PolicySpec::new("horizontal-tiered").with("levels", 0)).is_err());
        assert!(build_policy(&PolicySpec::new("leveled").with("write_buffer_size", 0)).is_err());
    }

    #[test]
    fn defaults_fill_only_declared_unset_options() {
        let mut spec = PolicySpec::new("tiered").with("size_ratio", 4);
        spec.fill_defaults([
            ("size_ratio", "8"),
            ("level0_trigger", "2"),
            ("bloom_bits_per_key", "5"),
        ])
        .unwrap();
        assert_eq!(
            spec.to_string(),
            "tiered:size_ratio=4,bloom_bits_per_key=5",
            "tiered has no level0_trigger, and size_ratio was already set"
        );
        let p = build_policy(&spec).unwrap();
        assert!(p.options().contains(&("size_ratio", "4".to_string())));
    }

    #[test]
    fn an_outside_policy_registers_once_and_builds_by_name() {
        fn build(config: &PolicyConfig) -> Result<Arc<dyn CompactionPolicy>, PolicyError> {
            let ratio = config.f64("size_ratio")?;
            Ok(Arc::new(
                crate::Tiered::new()
                    .with_size_ratio(ratio)
                    .with_target_file_size(1 << 20),
            ))
        }
        const OPTIONS: &[OptionSpec] = &[OptionSpec {
            name: "size_ratio",
            kind: OptionKind::Float,
            default: "3",
            rocksdb: None,
            doc: "runs per level",
        }];
        let registration = PolicyRegistration {
            name: "registry-test-tiered",
            summary: "tiering under another name, for this test",
            options: OPTIONS,
            build,
        };
        register(registration).unwrap();
        assert!(matches!(
            register(registration),
            Err(PolicyError::DuplicatePolicy(_))
        ));
        assert!(registered()
            .iter()
            .any(|r| r.name == "registry-test-tiered"));
        let p = build_policy(&"registry-test-tiered:size_ratio=5".parse().unwrap()).unwrap();
        assert!(p.options().contains(&("size_ratio", "5".to_string())));
        assert!(describe_policies().contains("registry-test-tiered: tiering under another name"));
    }
}
