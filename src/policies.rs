//! Choosing policies on the command line: specifications, `--policy-option`, workload files,
//! defaults.

use anyhow::{anyhow, bail, Result};
use strata_policy::{build_policy, registry, PolicySpec};
use strata_workload::WorkloadSpec;

/// The policies to run: `list` (comma-separated specifications, "all" for the built-in policies,
/// or "none"), else the workload file's `policies`, else every built-in policy. Each gets the
/// `--policy-option`s first, then the workload file's `policy_options`, then the command's own
/// `defaults`, wherever it declares the option and does not set it itself. A `--policy-option`
/// that no selected policy declares is an error, and so is a file option when the file's own
/// `policies` are run; when the command line picks the policies, the file's options go to those
/// that have them. Errors name where the bad value came from: `--policies`, `--policy-option`,
/// or the workload file's `policies` / `policy_options`.
pub fn policy_specs(
    list: Option<&str>,
    workload: &WorkloadSpec,
    policy_options: &[String],
    defaults: &[(&str, String)],
) -> Result<Vec<PolicySpec>> {
    let source = if list.is_some() || workload.policies.is_empty() {
        "--policies"
    } else {
        "the workload file's policies"
    };
    let mut specs = match list.map(str::trim) {
        Some("all") => builtins(),
        Some("none" | "") => Vec::new(),
        Some(list) => PolicySpec::parse_list(list).map_err(|e| anyhow!("--policies: {e}"))?,
        None if workload.policies.is_empty() => builtins(),
        None => PolicySpec::parse_list(&workload.policies.join(","))
            .map_err(|e| anyhow!("{source}: {e}"))?,
    };
    let declared = specs
        .iter()
        .map(|s| registry::lookup(&s.name))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow!("{source}: {e}"))?;
    // Each specification as written, so a bad value is blamed on where it was written rather
    // than found when the policy is built for its run.
    for spec in &specs {
        build_policy(spec).map_err(|e| anyhow!("{source}: {e}"))?;
    }
    let file_options = workload.policy_option_args();
    let strict_file_options = list.is_none();
    let mut shared = Vec::new();
    let mut lenient = Vec::new();
    for (option, strict, from) in policy_options
        .iter()
        .map(|o| (o.clone(), true, "--policy-option"))
        .chain(
            file_options
                .into_iter()
                .map(|o| (o, strict_file_options, "the workload file's policy_options")),
        )
    {
        let Some((name, value)) = option.split_once('=') else {
            bail!("{from} {option:?} should look like name=value");
        };
        let name = name.trim();
        // Each value alone, with every other option at its default, for every selected policy
        // that declares it.
        for r in declared.iter().filter(|r| r.has_option(name)) {
            let mut alone = PolicySpec::new(r.name);
            alone.fill_defaults([(name, value.trim())])?;
            build_policy(&alone).map_err(|e| anyhow!("{from} {name}={}: {e}", value.trim()))?;
        }
        if !strict {
            lenient.push((name.to_string(), value.trim().to_string()));
            continue;
        }
        if !declared.iter().any(|r| r.has_option(name)) {
            bail!(
                "{from} {name}: none of the selected policies ({}) has this option; \
                 `strata sim --list-policies` shows each policy's options",
                specs
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        shared.push((name.to_string(), value.trim().to_string()));
    }
    for spec in &mut specs {
        spec.fill_defaults(shared.iter().map(|(k, v)| (k.as_str(), v.as_str())))?;
        spec.fill_defaults(lenient.iter().map(|(k, v)| (k.as_str(), v.as_str())))?;
        spec.fill_defaults(defaults.iter().map(|(k, v)| (*k, v.as_str())))?;
    }
    Ok(specs)
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

    fn names(specs: &[PolicySpec]) -> Vec<String> {
        specs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn the_command_line_then_the_workload_file_then_defaults_set_options() {
        let file = workload(
            "policies = [\"leveled:level0_trigger=8\", \"tiered\"]\n[policy_options]\nsize_ratio = 6",
        );
        // The file's policies and options, then the command's defaults where still unset.
        let specs = policy_specs(
            None,
            &file,
            &[],
            &[
                ("size_ratio", "10".into()),
                ("target_file_size", "1MiB".into()),
            ],
        )
        .unwrap();
        assert_eq!(
            names(&specs),
            vec![
                "leveled:level0_trigger=8,size_ratio=6,target_file_size=1MiB",
                "tiered:size_ratio=6,target_file_size=1MiB"
            ]
        );
        // The command line's list replaces the file's (whose options then go only where they
        // apply), and command-line options win over the file's.
        let specs =
            policy_specs(Some("horizontal-tiered"), &file, &["levels=4".into()], &[]).unwrap();
        assert_eq!(names(&specs), vec!["horizontal-tiered:levels=4"]);
        let specs = policy_specs(Some("tiered"), &file, &["size_ratio=3".into()], &[]).unwrap();
        assert_eq!(names(&specs), vec!["tiered:size_ratio=3"]);
        // No list anywhere: every built-in policy.
        let plain = WorkloadSpec::preset("fillunique", &PresetParams::default())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            policy_specs(None, &plain, &[], &[]).unwrap().len(),
            registry::builtin_names().len()
        );
        assert!(policy_specs(Some("none"), &plain, &[], &[])
            .unwrap()
            .is_empty());
    }

    #[test]
    fn options_no_selected_policy_has_are_errors() {
        let plain = workload("");
        let e =
            policy_specs(Some("tiered"), &plain, &["level0_trigger=2".into()], &[]).unwrap_err();
        assert!(e.to_string().contains("level0_trigger"), "{e}");
        // A file option none of the file's own policies has is an error...
        let file = workload("policies = [\"leveled\"]\n[policy_options]\nfanout = 3");
        let e = policy_specs(None, &file, &[], &[]).unwrap_err();
        assert!(e.to_string().contains("fanout"), "{e}");
        // ...but when the command line picks other policies, it only goes where it applies.
        let specs = policy_specs(Some("tiered"), &file, &[], &[]).unwrap();
        assert_eq!(names(&specs), vec!["tiered"]);
        assert!(policy_specs(Some("tiered"), &plain, &["size_ratio".into()], &[]).is_err());
    }
}
