//! Choosing policies on the command line: specifications, `--policy-option`, workload files, and
//! the policy flags `strata sim` and `strata bench` share.
//!
//! One rule decides every option a run's policy gets, first match wins: the specification as
//! written (`leveled:size_ratio=6`), `--policy-option`, the workload file's `policy_options`, a
//! policy flag the user gave (`--size-ratio`, ...), then two facts of the run that a policy's
//! model must agree with (the write buffer it is flushed from and the data size the workload
//! ingests). Anything else keeps the policy's own declared default (`strata sim
//! --list-policies`); no command holds defaults of its own for a policy's options.

use crate::checks;
use crate::workload_args::size_arg;
use anyhow::{anyhow, bail, Result};
use clap::Args;
use std::sync::Arc;
use strata_policy::{build_policy, registry, CompactionPolicy, PolicyError, PolicySpec};
use strata_workload::WorkloadSpec;

/// The policy options both `strata sim` and `strata bench` take as flags. Each is `None` unless
/// given; a given one goes to every selected policy that declares the option and leaves it unset
/// (in `strata bench`, also to the peers, which are configured like `leveled`).
#[derive(Args, Clone, Debug, Default)]
pub struct PolicyFlags {
    /// Write buffer (memtable) size, at least 4KiB; also the write_buffer_size of every policy
    /// that has one and does not set it, as the engine does. RocksDB: write_buffer_size.
    /// Default: 4MiB in `strata sim`, 8MiB in `strata bench` (so that a default-sized run has
    /// several levels to compact). [SIZE: 4K = 4KB = 4KiB, any case]
    #[arg(
        long = "write-buffer-size",
        visible_alias = "buffer-size",
        value_name = "SIZE",
        value_parser = size_arg,
        allow_hyphen_values = true
    )]
    pub write_buffer_size: Option<u64>,
    /// Size ratio T, above 1, of every policy that has one. RocksDB:
    /// max_bytes_for_level_multiplier. Default: each policy's own.
    #[arg(long, allow_negative_numbers = true)]
    pub size_ratio: Option<f64>,
    /// Output table size of every policy that has one. RocksDB: target_file_size_base.
    /// Default: each policy's own. [SIZE: 4K = 4KB = 4KiB, any case]
    #[arg(long, value_name = "SIZE", value_parser = size_arg, allow_hyphen_values = true)]
    pub target_file_size: Option<u64>,
    /// Base level bound of every policy that has one. RocksDB: max_bytes_for_level_base.
    /// Default: each policy's own (leveled: size ratio × write buffer size).
    /// [SIZE: 4K = 4KB = 4KiB, any case]
    #[arg(
        long = "max-bytes-for-level-base",
        visible_alias = "level-base",
        value_name = "SIZE",
        value_parser = size_arg,
        allow_hyphen_values = true
    )]
    pub max_bytes_for_level_base: Option<u64>,
    /// Bloom filter bits per key of every policy, 0 or more (0: no filter). Default: each
    /// policy's own.
    #[arg(
        long = "bloom-bits-per-key",
        visible_alias = "bloom-bits",
        allow_negative_numbers = true
    )]
    pub bloom_bits_per_key: Option<f64>,
}

impl PolicyFlags {
    /// Checks the values given, naming the flag.
    pub fn check(&self) -> Result<()> {
        if let Some(bytes) = self.write_buffer_size {
            checks::size_at_least(
                "--write-buffer-size (--buffer-size)",
                bytes,
                checks::MIN_WRITE_BUFFER_SIZE,
            )?;
        }
        if let Some(t) = self.size_ratio {
            checks::above("--size-ratio", t, 1.0)?;
        }
        if let Some(bytes) = self.target_file_size {
            checks::size_at_least("--target-file-size", bytes, 1)?;
        }
        if let Some(bytes) = self.max_bytes_for_level_base {
            checks::size_at_least("--max-bytes-for-level-base (--level-base)", bytes, 1)?;
        }
        if let Some(bits) = self.bloom_bits_per_key {
            checks::not_negative("--bloom-bits-per-key (--bloom-bits)", bits)?;
        }
        Ok(())
    }

    /// The policy options given (the write buffer size aside, which is a fact of every run), each
    /// with the flag that gave it.
    pub fn given(&self) -> Vec<Given> {
        let mut given = Vec::new();
        let mut add = |option, flag, value: Option<String>| {
            if let Some(value) = value {
                given.push(Given {
                    option,
                    value,
                    source: flag,
                });
            }
        };
        add(
            "size_ratio",
            "--size-ratio",
            self.size_ratio.map(|t| t.to_string()),
        );
        add(
            "target_file_size",
            "--target-file-size",
            self.target_file_size.map(|b| b.to_string()),
        );
        add(
            "max_bytes_for_level_base",
            "--max-bytes-for-level-base",
            self.max_bytes_for_level_base.map(|b| b.to_string()),
        );
        add(
            "bloom_bits_per_key",
            "--bloom-bits-per-key",
            self.bloom_bits_per_key.map(|b| b.to_string()),
        );
        given
    }
}

/// One option value offered to the selected policies, and where it came from (for errors).
#[derive(Clone, Debug)]
pub struct Given {
    /// The option's name.
    pub option: &'static str,
    /// Its value, as text of the option's type.
    pub value: String,
    /// The flag or file key that gave it.
    pub source: &'static str,
}

/// The policies a command runs, as the user chose them, and the one way to build each.
#[derive(Clone, Debug)]
pub struct ChosenPolicies {
    /// Each run's specification as written, with `--policy-option` and the workload file's
    /// `policy_options` filling what it leaves unset: what runs are called (job logs, kept
    /// databases, reports) and what `strata bench` hands each run.
    pub labels: Vec<PolicySpec>,
    /// The specifications as written, for errors.
    written: Vec<PolicySpec>,
    /// Where the list came from: `--policies` or the workload file's `policies`.
    list_source: &'static str,
    /// `--policy-option`s and the file's `policy_options`, in the order they fill.
    options: Vec<(String, String, &'static str)>,
    /// The policy flags given.
    flags: Vec<Given>,
}

impl ChosenPolicies {
    /// Policy `i`'s whole specification: its label, then the policy flags given, then `facts`
    /// (the run's write buffer size and data size), each filling the options the policy declares
    /// and leaves unset.
    pub fn spec(&self, i: usize, facts: &[(&str, String)]) -> Result<PolicySpec> {
        let mut spec = self.labels[i].clone();
        spec.fill_defaults(self.flags.iter().map(|g| (g.option, g.value.as_str())))?;
        spec.fill_defaults(facts.iter().map(|(k, v)| (*k, v.as_str())))?;
        Ok(spec)
    }

    /// Builds policy `i` from [`ChosenPolicies::spec`], once; an error names where the value it
    /// is about came from.
    pub fn build(
        &self,
        i: usize,
        facts: &[(&str, String)],
    ) -> Result<(PolicySpec, Arc<dyn CompactionPolicy>)> {
        let spec = self.spec(i, facts)?;
        let policy = build_policy(&spec).map_err(|e| self.blame(i, facts, e))?;
        Ok((spec, policy))
    }

    /// `error`, from building policy `i`, prefixed with where the value it names was set: the
    /// specification as written, `--policy-option`, the workload file, a policy flag, or one of
    /// `facts` (named after their flags). The first of these that sets the option is the one
    /// the policy got.
    pub fn blame(&self, i: usize, facts: &[(&str, String)], error: PolicyError) -> anyhow::Error {
        let option = match &error {
            PolicyError::InvalidOption { option, .. } => Some(option.to_string()),
            PolicyError::BadOptionValue { option, .. } => Some(option.clone()),
            _ => None,
        };
        let written = &self.written[i];
        let source = option.as_deref().and_then(|name| {
            if written.is_set(name) {
                return None;
            }
            let from_options = self
                .options
                .iter()
                .find(|(n, _, _)| n == name)
                .map(|(n, v, from)| format!("{from} {n}={v}"));
            from_options
                .or_else(|| {
                    let given = self.flags.iter().find(|g| g.option == name)?;
                    Some(format!("{} {}", given.source, given.value))
                })
                .or_else(|| {
                    let (_, value) = facts.iter().find(|(n, _)| *n == name)?;
                    Some(format!("{} {value}", fact_source(name)))
                })
        });
        match source {
            Some(source) => anyhow!("{source}: {error}"),
            None => anyhow!("{} {written}: {error}", self.list_source),
        }
    }

    /// Whether any selected policy declares `option`.
    pub fn any_declares(&self, option: &str) -> bool {
        self.labels
            .iter()
            .any(|s| registry::lookup(&s.name).is_ok_and(|r| r.takes_option(option)))
    }

    /// Warns about each policy flag given that no selected policy declares.
    pub fn warn_unused_flags(&self) {
        for given in &self.flags {
            if !self.any_declares(given.option) {
                crate::workload_args::warn(&format!(
                    "{} ignored: none of the selected policies has {}",
                    given.source, given.option
                ));
            }
        }
    }
}

/// The flag behind a fact of the run offered to the policies.
fn fact_source(option: &str) -> &'static str {
    match option {
        "write_buffer_size" => "--write-buffer-size",
        "expected_data_size" => "the workload's size (--entries × entry size)",
        _ => "the run",
    }
}

/// The policies to run: `list` (comma-separated specifications, "all" for the built-in policies,
/// or "none"), else the workload file's `policies`, else every built-in policy. Each label gets
/// the `--policy-option`s first, then the workload file's `policy_options`, wherever the policy
/// declares the option and does not set it itself; the `flags` fill what is left when a policy
/// is built ([`ChosenPolicies::spec`]). A `--policy-option` that no selected policy declares is
/// an error, and so is a file option when the file's own `policies` are run; when the command
/// line picks the policies, the file's options go to those that have them.
pub fn choose_policies(
    list: Option<&str>,
    workload: &WorkloadSpec,
    policy_options: &[String],
    flags: &PolicyFlags,
) -> Result<ChosenPolicies> {
    let list_source = if list.is_some() || workload.policies.is_empty() {
        "--policies"
    } else {
        "the workload file's policies"
    };
    let written = match list.map(str::trim) {
        Some("all") => builtins(),
        Some("none" | "") => Vec::new(),
        Some(list) => PolicySpec::parse_list(list).map_err(|e| anyhow!("--policies: {e}"))?,
        None if workload.policies.is_empty() => builtins(),
        None => PolicySpec::parse_list(&workload.policies.join(","))
            .map_err(|e| anyhow!("{list_source}: {e}"))?,
    };
    let declared = written
        .iter()
        .map(|s| registry::lookup(&s.name))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow!("{list_source}: {e}"))?;
    // An option no policy declares is caught here, before anything is built; values are
    // checked when each policy is built for its run.
    for (spec, registration) in written.iter().zip(&declared) {
        if let Some((name, _)) = spec
            .options
            .iter()
            .find(|(n, _)| !registration.takes_option(n))
        {
            bail!(
                "{list_source} {spec}: {}",
                PolicyError::UnknownOption {
                    policy: registration.name.to_string(),
                    option: name.clone(),
                    known: registration
                        .options
                        .iter()
                        .map(|o| o.name)
                        .collect::<Vec<_>>()
                        .join(", "),
                }
            );
        }
    }
    let strict_file_options = list.is_none();
    let mut options = Vec::new();
    for (option, strict, from) in policy_options
        .iter()
        .map(|o| (o.clone(), true, "--policy-option"))
        .chain(
            workload
                .policy_option_args()
                .into_iter()
                .map(|o| (o, strict_file_options, "the workload file's policy_options")),
        )
    {
        let Some((name, value)) = option.split_once('=') else {
            bail!("{from} {option:?} should look like name=value");
        };
        let name = name.trim();
        if strict && !declared.iter().any(|r| r.takes_option(name)) {
            bail!(
                "{from} {name}: none of the selected policies ({}) has this option; \
                 `strata sim --list-policies` shows each policy's options",
                written
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        options.push((name.to_string(), value.trim().to_string(), from));
    }
    let mut labels = written.clone();
    for spec in &mut labels {
        spec.fill_defaults(options.iter().map(|(k, v, _)| (k.as_str(), v.as_str())))?;
    }
    Ok(ChosenPolicies {
        labels,
        written,
        list_source,
        options,
        flags: flags.given(),
    })
}

/// `list` without its "autopilot" entries, and whether it had one: the autopilot is a run of
/// its own, not a policy the registry builds. `None` stays `None` (the default list).
pub fn without_autopilot(list: Option<&str>) -> (Option<String>, bool) {
    let Some(list) = list else {
        return (None, false);
    };
    let mut autopilot = false;
    let rest: Vec<&str> = list
        .split(',')
        .filter(|item| {
            let is = item.trim() == strata_bench::engines::AUTOPILOT;
            autopilot |= is;
            !is
        })
        .collect();
    let rest = if autopilot && rest.is_empty() {
        "none".to_string()
    } else {
        rest.join(",")
    };
    (Some(rest), autopilot)
}

fn builtins() -> Vec<PolicySpec> {
    registry::builtin_names()
        .into_iter()
        .map(PolicySpec::new)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_workload::PresetParams;

    fn workload(toml_extra: &str) -> WorkloadSpec {
        let text = format!(
            "name = \"w\"\n{toml_extra}\n[[phases]]\nname = \"p\"\nops = 10\nmix = {{ insert = 1.0 }}\n"
        );
        WorkloadSpec::from_toml(&text)
            .map_err(anyhow::Error::msg)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn plain() -> WorkloadSpec {
        WorkloadSpec::preset("fillunique", &PresetParams::default())
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn names(specs: &[PolicySpec]) -> Vec<String> {
        specs.iter().map(ToString::to_string).collect()
    }

    fn no_flags() -> PolicyFlags {
        PolicyFlags::default()
    }

    #[test]
    fn the_command_line_then_the_workload_file_then_flags_then_facts_set_options() {
        let file = workload(
            "policies = [\"leveled:level0_trigger=8\", \"tiered\"]\n[policy_options]\nsize_ratio = 6",
        );
        let flags = PolicyFlags {
            size_ratio: Some(3.0),
            target_file_size: Some(1 << 20),
            ..PolicyFlags::default()
        };
        // The labels: the file's policies with its options.
        let chosen = choose_policies(None, &file, &[], &flags).unwrap();
        assert_eq!(
            names(&chosen.labels),
            vec![
                "leveled:level0_trigger=8,size_ratio=6",
                "tiered:size_ratio=6"
            ]
        );
        // Built: the flags, then the facts, fill what the label leaves unset.
        let facts = [("write_buffer_size", "65536".to_string())];
        assert_eq!(
            chosen.spec(0, &facts).unwrap().to_string(),
            "leveled:level0_trigger=8,size_ratio=6,target_file_size=1048576,write_buffer_size=65536"
        );
        // tiered has no write buffer size.
        assert_eq!(
            chosen.spec(1, &facts).unwrap().to_string(),
            "tiered:size_ratio=6,target_file_size=1048576"
        );
        // The command line's list replaces the file's (whose options then go only where they
        // apply), and command-line options win over the file's.
        let chosen = choose_policies(
            Some("horizontal-tiered"),
            &file,
            &["levels=4".into()],
            &no_flags(),
        )
        .unwrap();
        assert_eq!(names(&chosen.labels), vec!["horizontal-tiered:levels=4"]);
        let chosen =
            choose_policies(Some("tiered"), &file, &["size_ratio=3".into()], &no_flags()).unwrap();
        assert_eq!(names(&chosen.labels), vec!["tiered:size_ratio=3"]);
        // No list anywhere: every built-in policy.
        assert_eq!(
            choose_policies(None, &plain(), &[], &no_flags())
                .unwrap()
                .labels
                .len(),
            registry::builtin_names().len()
        );
        assert!(choose_policies(Some("none"), &plain(), &[], &no_flags())
            .unwrap()
            .labels
            .is_empty());
    }

    #[test]
    fn without_flags_each_policy_runs_its_own_defaults() {
        let chosen =
            choose_policies(Some("vertiorizon,leveled"), &plain(), &[], &no_flags()).unwrap();
        let facts = [("write_buffer_size", (4u64 << 20).to_string())];
        let (spec, policy) = chosen.build(0, &facts).unwrap();
        assert_eq!(spec.to_string(), "vertiorizon:write_buffer_size=4194304");
        let used = PolicySpec::of(policy.as_ref());
        let value = |spec: &PolicySpec, name: &str| {
            spec.options
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        // Vertiorizon declares T = 6; leveled T = 10.
        assert_eq!(value(&used, "size_ratio").as_deref(), Some("6"));
        let (_, leveled) = chosen.build(1, &facts).unwrap();
        assert_eq!(
            value(&PolicySpec::of(leveled.as_ref()), "size_ratio").as_deref(),
            Some("10")
        );
        // A flag given goes to both.
        let flags = PolicyFlags {
            size_ratio: Some(4.0),
            ..PolicyFlags::default()
        };
        let chosen = choose_policies(Some("vertiorizon,leveled"), &plain(), &[], &flags).unwrap();
        for i in 0..2 {
            let (_, policy) = chosen.build(i, &facts).unwrap();
            assert_eq!(
                value(&PolicySpec::of(policy.as_ref()), "size_ratio").as_deref(),
                Some("4")
            );
        }
    }

    #[test]
    fn a_bad_value_is_blamed_on_where_it_was_set() {
        let facts = [("write_buffer_size", "65536".to_string())];
        let build_error = |list: &str, options: &[String], flags: &PolicyFlags| {
            let chosen = choose_policies(Some(list), &plain(), options, flags).unwrap();
            chosen.build(0, &facts).map(|_| ()).unwrap_err().to_string()
        };
        let e = build_error("leveled:size_ratio=abc", &[], &no_flags());
        assert!(e.starts_with("--policies leveled:size_ratio=abc:"), "{e}");
        let e = build_error("leveled", &["size_ratio=abc".into()], &no_flags());
        assert!(e.starts_with("--policy-option size_ratio=abc:"), "{e}");
        let e = build_error("leveled", &["size_ratio=0.5".into()], &no_flags());
        assert!(e.starts_with("--policy-option size_ratio=0.5:"), "{e}");
        let flags = PolicyFlags {
            size_ratio: Some(0.5),
            ..PolicyFlags::default()
        };
        let e = build_error("leveled", &[], &flags);
        assert!(e.starts_with("--size-ratio 0.5:"), "{e}");
    }

    #[test]
    fn options_no_selected_policy_has_are_errors() {
        let plain = workload("");
        let e = choose_policies(
            Some("tiered"),
            &plain,
            &["level0_trigger=2".into()],
            &no_flags(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("level0_trigger"), "{e}");
        let e = choose_policies(Some("tiered:fanout=2"), &plain, &[], &no_flags()).unwrap_err();
        assert!(e.to_string().contains("--policies tiered:fanout=2"), "{e}");
        // A file option none of the file's own policies has is an error...
        let file = workload("policies = [\"leveled\"]\n[policy_options]\nfanout = 3");
        let e = choose_policies(None, &file, &[], &no_flags()).unwrap_err();
        assert!(e.to_string().contains("fanout"), "{e}");
        // ...but when the command line picks other policies, it only goes where it applies.
        let chosen = choose_policies(Some("tiered"), &file, &[], &no_flags()).unwrap();
        assert_eq!(names(&chosen.labels), vec!["tiered"]);
        assert!(
            choose_policies(Some("tiered"), &plain, &["size_ratio".into()], &no_flags()).is_err()
        );
    }
}
