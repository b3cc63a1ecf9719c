//! Choosing policies on the command line: specifications, `--policy-option`, workload files,
//! defaults.

use anyhow::{bail, Result};
use strata_policy::{registry, PolicySpec};
use strata_workload::WorkloadSpec;

/// The policies to run: `list` (comma-separated specifications, "all" for the built-in policies,
/// or "none"), else the workload file's `policies`, else every built-in policy. Each gets the
/// `--policy-option`s first, then the workload file's `policy_options`, then the command's own
/// `defaults`, wherever it declares the option and does not set it itself. A `--policy-option`
/// or file option that no selected policy declares is an error.
pub fn policy_specs(
    list: Option<&str>,
    workload: &WorkloadSpec,
    policy_options: &[String],
    defaults: &[(&str, String)],
) -> Result<Vec<PolicySpec>> {
    let mut specs = match list.map(str::trim) {
        Some("all") => builtins(),
        Some("none" | "") => Vec::new(),
        Some(list) => PolicySpec::parse_list(list)?,
        None if workload.policies.is_empty() => builtins(),
        None => PolicySpec::parse_list(&workload.policies.join(","))?,
    };
    let declared = specs
        .iter()
        .map(|s| registry::lookup(&s.name))
        .collect::<Result<Vec<_>, _>>()?;
    let mut shared = Vec::new();
    for option in policy_options
        .iter()
        .cloned()
        .chain(workload.policy_option_args())
    {
        let Some((name, value)) = option.split_once('=') else {
            bail!("policy option {option:?} should look like name=value");
        };
        let name = name.trim();
        if !declared.iter().any(|r| r.has_option(name)) {
            bail!(
                "policy option {name}: none of the selected policies ({}) has this option; \
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
