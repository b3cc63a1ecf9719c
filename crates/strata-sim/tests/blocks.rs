//! Per-block key ranges in the simulator: with a block size, every table it writes lists its data
//! blocks, cut as the engine cuts them (a block ends with the entry that fills it). The engine's
//! own cut, through its table builder, is compared in `strata-engine`'s differential test.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use strata_policy::{build_policy, PolicySpec};
use strata_sim::{key_bytes, SimConfig, Simulator};

/// 16-byte keys and 100-byte values: 116 bytes a put.
const ENTRY: u64 = 116;
const BLOCK: u64 = 4096;
/// Puts that fill a block: 35 reach 4,060 bytes, the 36th 4,176.
const PER_BLOCK: u64 = 36;

fn run(block_size: Option<u64>) -> Simulator {
    let policy = build_policy(
        &"leveled:write_buffer_size=64KiB,target_file_size=32KiB"
            .parse::<PolicySpec>()
            .unwrap(),
    )
    .unwrap();
    let config = SimConfig {
        buffer_size: 64 << 10,
        block_size,
        check_invariants: true,
        ..SimConfig::default()
    };
    let mut sim = Simulator::new(policy, config).unwrap();
    // A scrambled order, so merges interleave keys from several tables.
    for i in 0..20_000u64 {
        sim.put(i.wrapping_mul(7_919) % 20_011).unwrap();
    }
    sim.flush().unwrap();
    sim
}

#[test]
fn tables_list_their_blocks_cut_at_the_block_size() {
    let sim = run(Some(BLOCK));
    let mut tables = 0;
    for (_, _, table) in sim.version().tables() {
        tables += 1;
        let blocks = table.blocks.as_deref().unwrap();
        assert_eq!(
            blocks.iter().map(|b| b.entries).sum::<u64>(),
            table.entries,
            "table {}: block entries",
            table.id
        );
        assert_eq!(blocks[0].smallest, table.smallest);
        assert_eq!(blocks[blocks.len() - 1].largest, table.largest);
        let mut offset = 0;
        for (i, block) in blocks.iter().enumerate() {
            assert_eq!(block.file, table.id);
            assert_eq!(block.offset, offset, "table {} block {i}", table.id);
            assert_eq!(block.size, block.entries * ENTRY);
            assert!(block.smallest <= block.largest);
            if i + 1 < blocks.len() {
                assert_eq!(block.entries, PER_BLOCK, "table {} block {i}", table.id);
                assert!(block.largest < blocks[i + 1].smallest);
            } else {
                assert!((1..=PER_BLOCK).contains(&block.entries));
            }
            offset += block.size;
        }
        assert_eq!(offset, table.size);
    }
    assert!(tables > 10, "only {tables} tables");
    // Key 0 is the first put, so the smallest table starts with it.
    let smallest = sim
        .version()
        .tables()
        .map(|(_, _, t)| t.smallest.clone())
        .min()
        .unwrap();
    assert_eq!(smallest, key_bytes(0));
}

#[test]
fn without_a_block_size_tables_list_no_blocks() {
    let sim = run(None);
    assert!(sim.version().tables().all(|(_, _, t)| t.blocks.is_none()));
    // Same tables either way: blocks change no cut.
    let with = run(Some(BLOCK));
    let ranges = |s: &Simulator| {
        s.version()
            .tables()
            .map(|(level, _, t)| (level, t.smallest.clone(), t.largest.clone(), t.size))
            .collect::<Vec<_>>()
    };
    assert_eq!(ranges(&sim), ranges(&with));
}

#[test]
fn the_report_counts_the_blocks_written_into_each_level() {
    let blocks_in = |sim: &Simulator, level: usize| -> u64 {
        sim.version()
            .tables()
            .filter(|(l, _, _)| *l == level)
            .map(|(_, _, t)| t.blocks_written())
            .sum()
    };
    // Two buffers' worth of puts: two flushes into L0 and no merge, so the blocks written are
    // exactly the blocks L0 holds.
    let policy = build_policy(&"leveled:write_buffer_size=64KiB".parse().unwrap()).unwrap();
    let config = SimConfig {
        buffer_size: 64 << 10,
        block_size: Some(BLOCK),
        ..SimConfig::default()
    };
    let mut sim = Simulator::new(policy, config).unwrap();
    for i in 0..1_000u64 {
        sim.put(i * 3).unwrap();
    }
    sim.flush().unwrap();
    let l0 = blocks_in(&sim, 0);
    assert!(l0 > 20, "{l0}");
    let report = sim.finish().unwrap();
    assert_eq!(report.compactions, 0);
    assert_eq!(report.blocks_written_per_level, vec![l0]);

    // With merges: every level was written at least the blocks it holds, and the merges wrote
    // more blocks below L0 than the final tree holds there.
    let sim = run(Some(BLOCK));
    let held: Vec<u64> = (0..sim.version().levels().len())
        .map(|l| blocks_in(&sim, l))
        .collect();
    let report = sim.finish().unwrap();
    assert!(report.compactions > 0);
    let written = &report.blocks_written_per_level;
    for (level, &h) in held.iter().enumerate() {
        assert!(written.get(level).copied().unwrap_or(0) >= h, "L{level}");
    }
    assert!(written.iter().sum::<u64>() > held.iter().sum::<u64>());
    // Each put is written into some level at least once, 36 to a block.
    assert!(written.iter().sum::<u64>() >= 20_000 / PER_BLOCK);

    let report = run(None).finish().unwrap();
    assert!(report.blocks_written_per_level.is_empty());
}
