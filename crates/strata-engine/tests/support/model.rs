//! The driver of the model-checked runs that loop over every policy: the test's writes change
//! the database and its model alike, and the driver does the rest the same way for every test.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use strata_engine::fs::{FileSystem, MemFs};
use strata_engine::{Db, Options, ReadOptions, Snapshot};

/// What a check looks at: one key (a random one the check picks) or everything.
pub enum Check<'a> {
    /// One key, picked with this generator.
    One(&'a mut StdRng),
    /// Every read path over every key the test knows.
    All,
}

/// Runs 2,000 steps of `policy` on a fresh in-memory database opened with `options()`: two
/// steps in three are the test's `write` (given the step's number), the others take or drop a
/// snapshot (at most three live, each with the model as it was), `check` the latest state and
/// every live snapshot against their models, flush, compact everything, or, late in the run
/// with no snapshot live, reopen. At the end everything is checked, and again after a reopen.
pub fn model_check<M: Clone>(
    policy: &str,
    seed: u64,
    options: impl Fn() -> Options,
    mut model: M,
    mut write: impl FnMut(&Db, &mut StdRng, &mut M, u64),
    check: impl Fn(&Db, &ReadOptions<'_>, &M, Check<'_>, &str),
) {
    let fs = MemFs::new();
    let open = || {
        Db::open(
            "/db",
            options().with_file_system(Arc::new(fs.clone()) as Arc<dyn FileSystem>),
        )
        .expect("open")
    };
    let mut db = open();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut snapshots: Vec<(Snapshot, M)> = Vec::new();
    for step in 0..2000 {
        let ctx = format!("{policy}, seed {seed}, step {step}");
        match rng.random_range(0..100) {
            0..=66 => write(&db, &mut rng, &mut model, step),
            67..=71 => {
                if snapshots.len() < 3 {
                    snapshots.push((db.snapshot(), model.clone()));
                } else {
                    snapshots.remove(rng.random_range(0..snapshots.len()));
                }
            }
            72..=84 => {
                let mut pick = StdRng::seed_from_u64(rng.random());
                check(
                    &db,
                    &ReadOptions::default(),
                    &model,
                    Check::One(&mut pick),
                    &ctx,
                );
                for (snapshot, at) in &snapshots {
                    let mut pick = StdRng::seed_from_u64(rng.random());
                    check(
                        &db,
                        &ReadOptions::at(snapshot),
                        at,
                        Check::One(&mut pick),
                        &ctx,
                    );
                }
            }
            85..=88 => {
                check(&db, &ReadOptions::default(), &model, Check::All, &ctx);
                for (snapshot, at) in &snapshots {
                    check(&db, &ReadOptions::at(snapshot), at, Check::All, &ctx);
                }
            }
            89..=95 => db.flush().expect("flush"),
            96..=98 => db.compact_range::<&[u8], _>(..).expect("compact"),
            _ => {
                if step > 1000 && snapshots.is_empty() {
                    db.close().expect("close");
                    db = open();
                }
            }
        }
    }
    check(&db, &ReadOptions::default(), &model, Check::All, policy);
    db.close().expect("close");
    let db = open();
    check(
        &db,
        &ReadOptions::default(),
        &model,
        Check::All,
        &format!("{policy}, reopened"),
    );
    db.close().expect("close");
}
