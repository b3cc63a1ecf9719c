//! `manifest::recover` on a `MemFs` whose `CURRENT` names a manifest built from the input:
//! 1. the input as `MANIFEST-000001`, raw and with its record checksums recomputed;
//! 2. the input split at newlines, each line a `ManifestRecord` JSON written as one log record
//!    (also parsed and applied to a `strata_meta::Version` directly, without the framing);
//! 3. as 2, with `CURRENT` naming a manifest number taken from the input's first 8 bytes.
//!
//! A recovered version must survive the manifest rewrite path: rebuilding it from
//! `snapshot_edit` gives the same levels and policy state.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use strata_engine::filename::{manifest_file_name, CURRENT};
use strata_engine::fs::{FileSystem, MemFs};
use strata_engine::key::MAX_SEQNO;
use strata_engine::manifest::{self, ManifestRecord};
use strata_engine::KeyspaceId;
use strata_fuzz::{reframe_log, write_log};
use strata_meta::Version;

fn recover_from(manifest_bytes: &[u8], number: u64) {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let name = manifest_file_name(number);
    let write = |file: &str, bytes: &[u8]| -> std::io::Result<()> {
        let mut f = fs.create(&dir.join(file))?;
        f.append(bytes)?;
        f.sync()
    };
    let setup = fs
        .create_dir_all(dir)
        .and_then(|()| write(CURRENT, format!("{name}\n").as_bytes()))
        .and_then(|()| write(&name, manifest_bytes));
    if let Err(e) = setup {
        panic!("setting up the file system failed: {e}");
    }
    let Ok(recovered) = manifest::recover(&fs, dir) else {
        return;
    };
    assert_eq!(recovered.manifest_number, number);
    assert!(
        recovered.next_file_number > recovered.manifest_number,
        "next file number {} is not above the manifest's own number {}",
        recovered.next_file_number,
        recovered.manifest_number
    );
    assert!(
        recovered.last_seqno <= MAX_SEQNO,
        "recovered last sequence number {} is beyond the largest, {MAX_SEQNO}",
        recovered.last_seqno
    );
    // Every keyspace's version, the default one's always among them.
    assert!(recovered.keyspaces.contains_key(&KeyspaceId::DEFAULT));
    for keyspace in recovered.keyspaces.values() {
        let version = &keyspace.version;
        let rebuilt = match Version::new().apply(&manifest::snapshot_edit(version)) {
            Ok(v) => v,
            Err(e) => panic!("a recovered version cannot be rebuilt from its snapshot edit: {e}"),
        };
        assert_eq!(rebuilt.levels(), version.levels());
        assert_eq!(rebuilt.policy_state(), version.policy_state());
    }
}

fuzz_target!(|data: &[u8]| {
    // 1. The input as the manifest file.
    recover_from(data, 1);
    let fixed = reframe_log(data);
    if fixed != data {
        recover_from(&fixed, 1);
    }

    // 2. One record per line.
    let lines: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    let framed = write_log(lines.iter().copied());
    recover_from(&framed, 1);
    let mut version = Version::new();
    for line in &lines {
        if let Ok(record) = serde_json::from_slice::<ManifestRecord>(line) {
            if let Ok(next) = version.apply(&record.edit) {
                version = next;
            }
        }
    }

    // 3. CURRENT naming a manifest number from the input.
    if let Some(n) = data.first_chunk::<8>() {
        recover_from(&framed, u64::from_le_bytes(*n));
    }
});
