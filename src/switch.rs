//! `strata switch-policy`: hands a closed database's tree to another compaction policy
//! (`strata_engine::Db::set_policy`, through a switch at open).

use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::time::Instant;
use strata_engine::{Db, Options};
use strata_policy::PolicySpec;
use strata_sim::human_bytes;

/// Options of `strata switch-policy`.
#[derive(Args, Debug)]
pub struct SwitchArgs {
    /// The database directory (no process may have it open).
    dir: PathBuf,
    /// The new policy, with options: `tiered` or `tiered:size_ratio=4` (`strata sim
    /// --list-policies` shows them). Options it does not set come from the policy's defaults,
    /// except its write buffer size: the recorded policy's, when that has one (else 64MiB,
    /// the engine's default; set `write_buffer_size=` to choose).
    policy: String,
    /// After the handover, rewrite the whole tree with the new policy (a manual compaction of
    /// every key). Without it nothing is rewritten beyond what the handover needs.
    #[arg(long)]
    rewrite: bool,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
    /// The keyspace to hand over (`strata inspect` lists them); the default keyspace's switch
    /// happens at open, another's through `Keyspace::set_policy` right after it.
    #[arg(long, default_value = "default")]
    keyspace: String,
}

/// Runs `strata switch-policy`.
pub fn run(args: SwitchArgs) -> Result<()> {
    if !args.dir.is_dir() {
        bail!("{} is not a directory", args.dir.display());
    }
    let mut spec: PolicySpec = args
        .policy
        .parse()
        .with_context(|| format!("the policy {:?}", args.policy))?;
    // The buffer size the database's policy was built with, unless the new one sets it.
    let before = {
        let db = Db::open_read_only(&args.dir, Options::new())
            .with_context(|| format!("opening {}", args.dir.display()))?;
        let version = db.keyspace(&args.keyspace)?.version();
        let recorded = version.policy().map(str::to_string);
        // What the database had written: the baseline of what the switch writes.
        let lifetime = db.lifetime_stats();
        db.close()?;
        (
            recorded,
            version.run_count(),
            version.size(),
            lifetime.flush_bytes + lifetime.compaction_bytes_written,
        )
    };
    if let Some(recorded) = before
        .0
        .as_deref()
        .and_then(|r| r.parse::<PolicySpec>().ok())
    {
        if let Some((_, size)) = recorded
            .options
            .iter()
            .find(|(k, _)| k == "write_buffer_size")
        {
            spec.fill_defaults([("write_buffer_size", size.clone())])?;
        }
    }
    let default = args.keyspace == "default";
    let options = if default {
        Options::new()
            .with_policy_spec(spec.clone())
            .with_context(|| format!("the policy {spec}"))?
    } else {
        Options::new()
    };
    let started = Instant::now();
    let db =
        Db::open(&args.dir, options).with_context(|| format!("opening {}", args.dir.display()))?;
    let keyspace = db.keyspace(&args.keyspace)?;
    if !default {
        let policy =
            strata_policy::build_policy(&spec).with_context(|| format!("the policy {spec}"))?;
        keyspace.set_policy(policy)?;
    }
    keyspace.wait_for_compactions()?;
    if args.rewrite {
        keyspace.compact_range::<&[u8], _>(..)?;
        keyspace.wait_for_compactions()?;
    }
    let after = db.lifetime_stats();
    let version = keyspace.version();
    let now = version.policy().unwrap_or_default().to_string();
    let written = (after.compaction_bytes_written + after.flush_bytes).saturating_sub(before.3);
    let seconds = started.elapsed().as_secs_f64();
    let (runs, bytes) = (version.run_count(), version.size());
    drop(keyspace);
    db.close()?;
    if args.json {
        let report = serde_json::json!({
            "dir": args.dir,
            "keyspace": args.keyspace,
            "from": before.0,
            "to": now,
            "runs_before": before.1,
            "runs_after": runs,
            "bytes_before": before.2,
            "bytes_after": bytes,
            "bytes_written": written,
            "rewrite": args.rewrite,
            "seconds": seconds,
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{}: from {} to {}\n{} runs ({}) -> {} runs ({}); {} written ({:.2}x the tree){} in {seconds:.1}s",
            args.dir.display(),
            before.0.as_deref().unwrap_or("(no recorded policy)"),
            now,
            before.1,
            human_bytes(before.2),
            runs,
            human_bytes(bytes),
            human_bytes(written),
            written as f64 / before.2.max(1) as f64,
            if args.rewrite { " with the rewrite" } else { "" },
        );
    }
    Ok(())
}
