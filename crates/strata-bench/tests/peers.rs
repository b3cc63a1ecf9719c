//! The peers this build has (`--features fjall`, `rocksdb` or `peers`) store, delete, read and
//! scan what they are given, through the same adapter the benchmark drives. Without a peer
//! feature there is nothing to check, so the file is empty.

#![cfg(any(feature = "fjall", feature = "rocksdb"))]
#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use strata_bench::engines::{available_peers, open_peer, EngineSettings};

fn key(i: u32) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

#[test]
fn every_peer_reads_back_what_it_was_given() {
    let matched = EngineSettings {
        // Small buffers and files, so the keys below reach tables and compactions.
        write_buffer_size: 1 << 20,
        target_file_size: Some(1 << 20),
        level_base: Some(4 << 20),
        block_cache: 1 << 20,
        ..EngineSettings::default()
    };
    // Each engine's own defaults (`strata bench --engine-defaults`), where the data stays in
    // the memtable until the settle flushes it.
    let defaults = EngineSettings {
        engine_defaults: true,
        ..EngineSettings::default()
    };
    for settings in [matched, defaults] {
        reads_back(&settings);
    }
}

fn reads_back(settings: &EngineSettings) {
    let value = vec![7u8; 100];
    for peer in available_peers() {
        let dir = tempfile::tempdir().unwrap();
        let engine = open_peer(peer, dir.path(), settings).unwrap();
        for i in 0..50_000 {
            engine.put(&key(i), &value).unwrap();
        }
        // Every third key deleted.
        for i in (0..50_000).step_by(3) {
            engine.delete(&key(i)).unwrap();
        }
        engine.settle().unwrap();
        assert!(!engine.get(&key(0)).unwrap(), "{peer}: deleted key read");
        assert!(engine.get(&key(1)).unwrap(), "{peer}: stored key missing");
        assert!(
            !engine.get(&key(60_000)).unwrap(),
            "{peer}: absent key read"
        );
        // From key 49,990 on, those not divisible by 3 remain: 49,990, 49,991, 49,993, 49,994,
        // 49,996, 49,997 and 49,999.
        assert_eq!(engine.scan(&key(49_990), 100).unwrap(), 7, "{peer}");
        assert_eq!(engine.scan(&key(0), 10).unwrap(), 10, "{peer}");
        // A batched read finds what single reads find: keys 0..32, a third of them deleted,
        // plus one never written.
        let keys: Vec<Vec<u8>> = (0..32).chain([60_000]).map(key).collect();
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        assert_eq!(engine.multi_get(&refs).unwrap(), 21, "{peer}");
        assert_eq!(engine.multi_get(&[]).unwrap(), 0, "{peer}");
    }
}
