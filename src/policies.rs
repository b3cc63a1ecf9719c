//! Choosing policies on the command line: specifications, `--policy-option`, defaults.

use anyhow::{bail, Result};
use strata_policy::{registry, PolicySpec};

/// The policies to run: `list` (comma-separated specifications, "all" for the built-in policies, or "none"), each given
/// `--policy-option`s first and then the command's own `defaults`, where the policy declares them
/// and does not set them itself. A `--policy-option` that no selected policy declares is an error.
pub fn policy_specs(
    list: &str,
    policy_options: &[String],
    defaults: &[(&str, String)],
) -> Result<Vec<PolicySpec>> {
    let mut specs = match list.trim() {
        "all" => registry::builtin_names()
            .into_iter()
            .map(PolicySpec::new)
            .collect(),
        "none" | "" => Vec::new(),
        _ => PolicySpec::parse_list(list)?,
    };
    let mut shared = Vec::new();
    for option in policy_options {
        let Some((name, value)) = option.split_once('=') else {
            bail!("--policy-option {option:?} should look like name=value");
        };
        let name = name.trim();
        let declared = specs
            .iter()
            .map(|s| registry::lookup(&s.name))
            .collect::<Result<Vec<_>, _>>()?;
        if !declared.iter().any(|r| r.has_option(name)) {
            bail!(
                "--policy-option {name}: none of the selected policies ({}) has this option; \
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
