//! The chain of WALs replayed at open, and what damage in it means.
//!
//! # Link records
//!
//! A WAL's first record is a *link*: the number of the WAL written before it and that WAL's
//! length when it was finished (synced and closed at the memtable switch that started this one,
//! or replayed up to there by the open that started this one). Its payload has a write-batch
//! header whose sequence number is [`LINK_SEQ`] (no batch can start there) and count 0, then the
//! predecessor's number and length (u64 LE each; number 0 when there is none).
//!
//! Links let recovery tell a torn tail, which only the newest WAL may have, from lost history:
//! an older WAL that ends before the length its successor records has lost records that were
//! synced (the switch synced it), while later writes survive. Without links, truncating an older
//! WAL at a record boundary would be invisible and open would succeed with a hole.
//!
//! # The rule
//!
//! WALs at or above the manifest's log number are replayed in number order. For each:
//!
//! - its link must name the WAL replayed before it (a link naming a WAL at or above the log
//!   number that is not there means that WAL is missing);
//! - if the next WAL's link vouches for it, its records must end exactly at the vouched length;
//!   bytes after it are ignored (a torn tail that an earlier open dropped before linking);
//! - otherwise damage is accepted only as a torn tail with nothing after it: no later WAL holds
//!   a record. [`RecoveryMode::AbsoluteConsistency`] refuses even that.
//!
//! Anything else is a *hole*. [`RecoveryMode::TolerateCorruptedTail`] and
//! [`RecoveryMode::AbsoluteConsistency`] report it as [`Error::Corruption`] naming the file and
//! offset, before anything is written; [`RecoveryMode::PointInTime`] replays everything before it
//! and reports where it stopped, and the caller sets the WALs from there on aside, unless one of
//! those holds entries a window flush re-logged (the manifest lists such WALs): those are older
//! than data already in tables, so stopping before them would not leave a prefix of the history,
//! and point-in-time recovery reports the hole as corruption too. The crash test's damage cases
//! found this (a policy with window flushes, a byte flipped in the newest WAL).
//!
//! WALs written before links existed have none: they are checked by the last rule only. A WAL
//! without a single valid record that no link names is left out: a switch whose link record
//! failed leaves one when its file cannot be removed, and it holds nothing.

use crate::batch::{self, BatchOp};
use crate::error::{Error, Result};
use crate::filename;
use crate::key::SeqNo;
use crate::keyspace::KeyspaceId;
use crate::log::{self, LogReader, RecoveryMode};

/// Sequence number in a link record's header: beyond every sequence number a batch can have.
pub const LINK_SEQ: SeqNo = u64::MAX;

/// Bytes of a link record's payload.
const LINK_LEN: usize = batch::HEADER_LEN + 16;

/// A WAL's predecessor as its link record names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalLink {
    /// The predecessor's file number.
    pub number: u64,
    /// Its length in bytes when it was finished.
    pub len: u64,
}

/// The payload of a link record naming `predecessor` (or none).
pub fn encode_link(predecessor: Option<WalLink>) -> Vec<u8> {
    let link = predecessor.unwrap_or(WalLink { number: 0, len: 0 });
    let mut out = Vec::with_capacity(LINK_LEN);
    out.extend_from_slice(&LINK_SEQ.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&link.number.to_le_bytes());
    out.extend_from_slice(&link.len.to_le_bytes());
    out
}

/// `None` if `payload` is not a link record; otherwise the predecessor it names (if any), or why
/// it is malformed.
pub(crate) fn decode_link(payload: &[u8]) -> Option<std::result::Result<Option<WalLink>, String>> {
    let seq = u64::from_le_bytes(payload.get(..8)?.try_into().ok()?);
    if seq != LINK_SEQ {
        return None;
    }
    if payload.len() != LINK_LEN || payload[8..12] != [0; 4] {
        return Some(Err(format!(
            "WAL link record of {} bytes is malformed",
            payload.len()
        )));
    }
    let field = |at: usize| {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&payload[at..at + 8]);
        u64::from_le_bytes(bytes)
    };
    let (number, len) = (field(12), field(20));
    Some(Ok((number != 0).then_some(WalLink { number, len })))
}

/// The predecessor named by the link record that starts `wal` (a WAL's whole content), if it
/// starts with a well-formed one naming a WAL.
pub fn link_of(wal: &[u8]) -> Option<WalLink> {
    match log::first_record(wal).and_then(decode_link) {
        Some(Ok(link)) => link,
        _ => None,
    }
}

/// A WAL file as read at open.
pub struct WalFile {
    /// Its file number.
    pub number: u64,
    /// Its whole content.
    pub data: Vec<u8>,
}

/// Where point-in-time recovery stopped ([`RecoveryMode::PointInTime`]); `Db::recovery_stop`
/// returns it after such an open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveryStop {
    /// The file holding the hole.
    pub file: String,
    /// Offset of the hole in `file`: where its valid part ends.
    pub offset: u64,
    /// What was wrong.
    pub reason: String,
    /// The WALs not, or not wholly, replayed, in number order: the caller sets them aside. The
    /// first may have had a prefix replayed (then it is the last WAL replayed).
    pub set_aside: Vec<u64>,
}

/// What a replay did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replayed {
    /// The largest sequence number replayed.
    pub max_seq: Option<SeqNo>,
    /// The last WAL replayed and how much of it: the next WAL's predecessor.
    pub last: Option<WalLink>,
    /// Point-in-time recovery only: where it stopped.
    pub stopped: Option<RecoveryStop>,
}

/// Replays `wals` (every WAL at or above `log_number`, in number order) through `apply` (given
/// the WAL's number, the sequence number, the keyspace and the operation) following the
/// [module rule](self). Fails with [`Error::Corruption`] on a hole, except in
/// [`RecoveryMode::PointInTime`]; on an error `apply` may have seen a prefix of the history.
pub fn replay(
    wals: Vec<WalFile>,
    log_number: u64,
    relog_wals: &[u64],
    mode: RecoveryMode,
    mut apply: impl FnMut(u64, SeqNo, KeyspaceId, BatchOp<'_>),
) -> Result<Replayed> {
    let link_of = |w: &WalFile| link_of(&w.data);
    // A WAL without a single valid record that no link names is what a switch whose link
    // record failed leaves (its file could not be removed): it holds nothing, so it is no link
    // of the chain.
    let named: Vec<u64> = wals.iter().filter_map(link_of).map(|l| l.number).collect();
    let wals: Vec<WalFile> = wals
        .into_iter()
        .filter(|w| log::holds_valid_record(&w.data) || named.contains(&w.number))
        .collect();
    let numbers: Vec<u64> = wals.iter().map(|w| w.number).collect();
    let links: Vec<Option<WalLink>> = wals.iter().map(link_of).collect();
    let holds_records: Vec<bool> = wals
        .iter()
        .map(|w| log::holds_valid_record(&w.data))
        .collect();
    let mut out = Replayed::default();
    for (i, wal) in wals.into_iter().enumerate() {
        let name = filename::wal_file_name(wal.number);
        let hole = |out: Replayed, file: &str, offset: u64, reason: String| {
            stop_or_fail(mode, out, &numbers[i..], relog_wals, file, offset, reason)
        };
        // The chain into this WAL.
        if let Some(link) = links[i] {
            let broken = match i.checked_sub(1).map(|p| numbers[p]) {
                Some(p) if p == link.number => None,
                Some(p) => Some(format!(
                    "its link record names WAL {} as the one before it, but WAL {p} is",
                    link.number
                )),
                None if link.number >= log_number => Some(format!(
                    "its link record names WAL {} as the one before it, which is missing though \
                     the manifest needs WALs from {log_number} on",
                    link.number
                )),
                None => None,
            };
            if let Some(reason) = broken {
                return hole(out, &name, 0, reason);
            }
        }
        // How long the next WAL says this one was.
        let vouched = match links.get(i + 1) {
            Some(Some(link)) if link.number == wal.number => Some(link.len),
            _ => None,
        };
        let mut data = wal.data;
        let file_len = data.len() as u64;
        if let Some(len) = vouched {
            // What follows the vouched length was never part of the history (see the module
            // docs); a WAL shorter than it is caught below as damage before the vouched end.
            data.truncate(usize::try_from(len).unwrap_or(usize::MAX));
        }
        let damage = replay_log(wal.number, data, &mut out, &mut apply)?;
        let damage = match (damage, vouched) {
            (None, Some(len)) if file_len < len => Some((
                file_len,
                format!("the WAL ends after {file_len} bytes"),
                true,
            )),
            (damage, _) => damage,
        };
        let Some((offset, reason, torn)) = damage else {
            continue;
        };
        let nothing_after = !holds_records[i + 1..].iter().any(|&h| h);
        if vouched.is_none() && torn && nothing_after && mode != RecoveryMode::AbsoluteConsistency {
            // The torn tail of the history's last write, never acknowledged as durable.
            continue;
        }
        let reason = match vouched {
            Some(len) => format!(
                "{reason}, though WAL {} records it as {len} bytes long: synced records are \
                 missing",
                numbers[i + 1]
            ),
            None if !nothing_after => format!("{reason}, and a later WAL holds records"),
            None if torn => {
                format!(
                    "{reason}: a torn tail, which absolute-consistency recovery does not accept"
                )
            }
            None => reason,
        };
        return hole(out, &name, offset, reason);
    }
    Ok(out)
}

/// Replays the records of `data` (a prefix of WAL `number`) into `apply`, updating `out`, and
/// returns the damage that ended it, if any: offset, reason, and whether it is a torn tail. A
/// record whose payload does not decode is damage in the middle.
fn replay_log(
    number: u64,
    data: Vec<u8>,
    out: &mut Replayed,
    apply: &mut impl FnMut(u64, SeqNo, KeyspaceId, BatchOp<'_>),
) -> Result<Option<(u64, String, bool)>> {
    let name = filename::wal_file_name(number);
    let mut reader = LogReader::new(data, name, RecoveryMode::PointInTime);
    let mut first = true;
    out.last = Some(WalLink { number, len: 0 });
    while let Some(payload) = reader.next_record()? {
        let decoded = match decode_link(&payload) {
            Some(Ok(_)) if first => Ok(None),
            Some(Ok(_)) => Err("a link record that is not the WAL's first record".to_string()),
            Some(Err(why)) => Err(why),
            None => {
                // Decode the whole record before applying any of it: a record that fails part
                // way is damage, and none of its batch may reach the memtable (a point-in-time
                // stop there would otherwise keep part of a batch). Found by the `wal_chain`
                // fuzz target.
                let mut ops = Vec::new();
                batch::replay_wal_payload(&payload, |seq, keyspace, op| {
                    ops.push((seq, keyspace, op))
                })
                .inspect(|_| {
                    for (seq, keyspace, op) in ops {
                        apply(number, seq, keyspace, op);
                    }
                })
            }
        };
        first = false;
        match decoded {
            Ok(last) => {
                if let Some(last) = last {
                    out.max_seq = Some(out.max_seq.map_or(last, |m| m.max(last)));
                }
                out.last = Some(WalLink {
                    number,
                    len: reader.valid_len(),
                });
            }
            Err(why) => return Ok(Some((reader.last_record_offset(), why, false))),
        }
    }
    Ok(reader
        .damage()
        .map(|d| (d.offset, d.reason.clone(), d.torn)))
}

/// A hole at `offset` of `file`: an error, or in point-in-time mode the end of the replay, with
/// `rest` (the WAL holding the hole and every later one) set aside.
fn stop_or_fail(
    mode: RecoveryMode,
    mut out: Replayed,
    rest: &[u64],
    relog_wals: &[u64],
    file: &str,
    offset: u64,
    reason: String,
) -> Result<Replayed> {
    if mode != RecoveryMode::PointInTime {
        return Err(Error::corruption(file, offset, reason));
    }
    if let Some(relog) = rest.iter().find(|n| relog_wals.contains(n)) {
        // Its re-logged entries are older than data already in tables: dropping them would
        // keep newer writes while losing older ones.
        return Err(Error::corruption(
            file,
            offset,
            format!(
                "{reason}; point-in-time recovery cannot stop here, since WAL {relog} holds \
                 entries a window flush re-logged or left buffered, older than data already in \
                 tables"
            ),
        ));
    }
    out.stopped = Some(RecoveryStop {
        file: file.to_string(),
        offset,
        reason,
        set_aside: rest.to_vec(),
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{encode_group, WriteBatch};
    use crate::fs::{FileSystem, MemFs};
    use std::path::Path;

    /// A WAL's bytes: a link to `predecessor` (when `link` is on), then one single-put batch per
    /// sequence number in `seqs`; also the offset where each batch's record ends.
    fn wal(link: Option<Option<WalLink>>, seqs: std::ops::Range<u64>) -> (Vec<u8>, Vec<u64>) {
        let fs = MemFs::new();
        let path = Path::new("/wal");
        let mut writer = crate::log::LogWriter::new(fs.create(path).unwrap());
        if let Some(predecessor) = link {
            writer.add_record(&encode_link(predecessor)).unwrap();
        }
        let mut ends = Vec::new();
        for seq in seqs {
            let mut batch = WriteBatch::new();
            batch.put(format!("k{seq:04}"), "v").unwrap();
            let mut payload = Vec::new();
            encode_group(&mut payload, seq, &[&batch]);
            writer.add_record(&payload).unwrap();
            ends.push(writer.len());
        }
        writer.sync().unwrap();
        (fs.read(path).unwrap(), ends)
    }

    /// Two linked WALs, 5 and 6, holding sequence numbers 1..=10 and 11..=20; returns them and
    /// where each record of WAL 5 ends.
    fn chain() -> (Vec<u8>, Vec<u64>, Vec<u8>) {
        let (five, ends) = wal(Some(None), 1..11);
        let link = WalLink {
            number: 5,
            len: five.len() as u64,
        };
        let (six, _) = wal(Some(Some(link)), 11..21);
        (five, ends, six)
    }

    fn run(wals: Vec<(u64, Vec<u8>)>, mode: RecoveryMode) -> (Result<Replayed>, Vec<u64>) {
        let files = wals
            .into_iter()
            .map(|(number, data)| WalFile { number, data })
            .collect();
        let mut seqs = Vec::new();
        let result = replay(files, 5, &[], mode, |_, seq, _, _| seqs.push(seq));
        (result, seqs)
    }

    const MODES: [RecoveryMode; 3] = [
        RecoveryMode::TolerateCorruptedTail,
        RecoveryMode::AbsoluteConsistency,
        RecoveryMode::PointInTime,
    ];

    #[test]
    fn link_of_reads_the_predecessor_a_wal_names() {
        let five = WalLink {
            number: 5,
            len: 123,
        };
        assert_eq!(link_of(&wal(Some(Some(five)), 1..3).0), Some(five));
        // A link naming no predecessor, no link, and an empty file all name none.
        assert_eq!(link_of(&wal(Some(None), 1..3).0), None);
        assert_eq!(link_of(&wal(None, 1..3).0), None);
        assert_eq!(link_of(&[]), None);
    }

    #[test]
    fn an_intact_chain_replays_everything_in_every_mode() {
        let (five, _, six) = chain();
        let six_len = six.len() as u64;
        for mode in MODES {
            let (result, seqs) = run(vec![(5, five.clone()), (6, six.clone())], mode);
            let replayed = result.unwrap();
            assert_eq!(seqs, (1..21).collect::<Vec<_>>(), "{mode:?}");
            assert_eq!(replayed.max_seq, Some(20));
            assert_eq!(
                replayed.last,
                Some(WalLink {
                    number: 6,
                    len: six_len
                })
            );
            assert_eq!(replayed.stopped, None);
        }
    }

    /// The hole of RELIABILITY.md, section 'Lost history in an older WAL': an older WAL cut at a
    /// record boundary looks complete on its own.
    #[test]
    fn an_older_wal_cut_at_a_record_boundary_is_a_hole() {
        let (mut five, ends, six) = chain();
        five.truncate(ends[6] as usize);
        for mode in [
            RecoveryMode::TolerateCorruptedTail,
            RecoveryMode::AbsoluteConsistency,
        ] {
            let (result, _) = run(vec![(5, five.clone()), (6, six.clone())], mode);
            match result {
                Err(Error::Corruption {
                    file,
                    offset,
                    reason,
                }) => {
                    assert_eq!(file, "000005.log");
                    assert_eq!(offset, ends[6]);
                    assert!(reason.contains("WAL 6 records it as"), "{reason}");
                }
                other => panic!("{mode:?}: {other:?}"),
            }
        }
        // Point in time keeps the prefix: sequence numbers 1..=7, nothing of WAL 6.
        let (result, seqs) = run(vec![(5, five), (6, six)], RecoveryMode::PointInTime);
        let replayed = result.unwrap();
        assert_eq!(seqs, (1..8).collect::<Vec<_>>());
        let stop = replayed.stopped.unwrap();
        assert_eq!((stop.file.as_str(), stop.offset), ("000005.log", ends[6]));
        assert_eq!(stop.set_aside, vec![5, 6]);
        assert_eq!(
            replayed.last,
            Some(WalLink {
                number: 5,
                len: ends[6]
            })
        );
    }

    /// A record that fails to decode part way is damage, and none of its operations is
    /// applied: a point-in-time stop there keeps whole batches only.
    #[test]
    fn a_record_that_fails_part_way_applies_nothing() {
        let fs = MemFs::new();
        let path = Path::new("/wal");
        let mut writer = crate::log::LogWriter::new(fs.create(path).unwrap());
        writer.add_record(&encode_link(None)).unwrap();
        let mut two = WriteBatch::new();
        two.put("a", "1").unwrap().put("b", "2").unwrap();
        let mut payload = Vec::new();
        encode_group(&mut payload, 1, &[&two]);
        writer.add_record(&payload).unwrap();
        // Announces one operation, holds two: the first decodes before the count fails.
        let mut bad = Vec::new();
        encode_group(&mut bad, 3, &[&two]);
        bad[8..12].copy_from_slice(&1u32.to_le_bytes());
        writer.add_record(&bad).unwrap();
        let mut after = Vec::new();
        encode_group(&mut after, 5, &[&two]);
        writer.add_record(&after).unwrap();
        writer.sync().unwrap();
        let data = fs.read(path).unwrap();
        let mut seqs = Vec::new();
        let files = vec![WalFile { number: 5, data }];
        let replayed = replay(files, 5, &[], RecoveryMode::PointInTime, |_, seq, _, _| {
            seqs.push(seq)
        })
        .unwrap();
        assert_eq!(seqs, [1, 2], "only the whole batch before the bad record");
        assert_eq!(replayed.max_seq, Some(2));
        assert!(replayed
            .stopped
            .unwrap()
            .reason
            .contains("announces 1 operations"));
    }

    /// A WAL holding entries a window flush re-logged may not be dropped by point-in-time
    /// recovery: they are older than data already in tables, so the result would not be a
    /// prefix of the history. Damage in a WAL before it, or after it, is handled as usual.
    #[test]
    fn point_in_time_never_drops_a_wal_with_re_logged_entries() {
        let (mut five, ends, six) = chain();
        five.truncate(ends[6] as usize);
        let files = |five: &[u8], six: &[u8]| {
            vec![
                WalFile {
                    number: 5,
                    data: five.to_vec(),
                },
                WalFile {
                    number: 6,
                    data: six.to_vec(),
                },
            ]
        };
        for relog in [5, 6] {
            let result = replay(
                files(&five, &six),
                5,
                &[relog],
                RecoveryMode::PointInTime,
                |_, _, _, _| {},
            );
            match result {
                Err(Error::Corruption { file, reason, .. }) => {
                    assert_eq!(file, "000005.log");
                    assert!(
                        reason.contains(&format!("WAL {relog} holds entries")),
                        "{reason}"
                    );
                }
                other => panic!("re-logged into {relog}: {other:?}"),
            }
        }
        // A re-log WAL before the damage was replayed whole: the stop stays a prefix.
        let result = replay(
            files(&five, &six),
            5,
            &[4],
            RecoveryMode::PointInTime,
            |_, _, _, _| {},
        );
        assert!(result.unwrap().stopped.is_some());
    }

    #[test]
    fn a_torn_tail_of_an_older_wal_is_a_hole_but_of_the_newest_it_is_not() {
        let (mut five, ends, mut six) = chain();
        five.truncate(ends[6] as usize + 5);
        let (result, _) = run(
            vec![(5, five.clone()), (6, six.clone())],
            RecoveryMode::TolerateCorruptedTail,
        );
        assert!(
            matches!(result, Err(Error::Corruption { ref file, offset, .. }) if file == "000005.log" && offset == ends[6]),
            "{result:?}"
        );
        let six_len = six.len();
        six.truncate(six_len - 3);
        let (result, seqs) = run(vec![(5, five), (6, six)], RecoveryMode::PointInTime);
        assert_eq!(seqs, (1..8).collect::<Vec<_>>(), "nothing after the hole");
        assert!(result.unwrap().stopped.is_some());
        // The newest WAL's torn tail alone is tolerated, except in absolute consistency.
        let (five, _, mut six) = chain();
        six.truncate(six_len - 3);
        let (result, seqs) = run(
            vec![(5, five.clone()), (6, six.clone())],
            RecoveryMode::TolerateCorruptedTail,
        );
        assert_eq!(result.unwrap().stopped, None);
        assert_eq!(seqs, (1..20).collect::<Vec<_>>());
        let (result, _) = run(vec![(5, five), (6, six)], RecoveryMode::AbsoluteConsistency);
        assert!(
            matches!(result, Err(Error::Corruption { ref file, .. }) if file == "000006.log"),
            "{result:?}"
        );
    }

    #[test]
    fn a_missing_wal_between_two_is_a_hole() {
        let (five, _, six) = chain();
        let seven_link = WalLink {
            number: 6,
            len: six.len() as u64,
        };
        let (seven, _) = wal(Some(Some(seven_link)), 21..25);
        for mode in MODES {
            let (result, seqs) = run(vec![(5, five.clone()), (7, seven.clone())], mode);
            if mode == RecoveryMode::PointInTime {
                let stop = result.unwrap().stopped.unwrap();
                assert_eq!((stop.file.as_str(), stop.offset), ("000007.log", 0));
                assert_eq!(stop.set_aside, vec![7]);
                assert_eq!(seqs, (1..11).collect::<Vec<_>>());
            } else {
                assert!(
                    matches!(result, Err(Error::Corruption { ref reason, .. }) if reason.contains("WAL 6")),
                    "{result:?}"
                );
            }
        }
        // The oldest WAL to replay is missing: WAL 6 names WAL 5, and the manifest needs 5.
        let (result, _) = run(vec![(6, six)], RecoveryMode::TolerateCorruptedTail);
        assert!(
            matches!(result, Err(Error::Corruption { ref reason, .. }) if reason.contains("missing")),
            "{result:?}"
        );
    }

    #[test]
    fn bytes_after_the_vouched_length_are_ignored() {
        // An open that dropped WAL 5's torn tail links WAL 6 to where the valid part ended.
        let (mut five, ends, _) = chain();
        five.truncate(ends[6] as usize + 5);
        let link = WalLink {
            number: 5,
            len: ends[6],
        };
        let (six, _) = wal(Some(Some(link)), 8..12);
        for mode in MODES {
            let (result, seqs) = run(vec![(5, five.clone()), (6, six.clone())], mode);
            assert_eq!(result.unwrap().stopped, None, "{mode:?}");
            assert_eq!(seqs, (1..12).collect::<Vec<_>>());
        }
    }

    #[test]
    fn an_empty_unnamed_wal_is_no_link_of_the_chain() {
        // A switch whose link record failed, and whose file could not be removed.
        let (five, _, six) = chain();
        for mode in MODES {
            let (result, seqs) = run(
                vec![(5, five.clone()), (6, vec![1, 2, 3]), (7, six.clone())],
                mode,
            );
            // WAL 7 names WAL 5 (the chain() link says 5), skipping the empty 6.
            assert_eq!(result.unwrap().stopped, None, "{mode:?}");
            assert_eq!(seqs.len(), 20);
        }
    }

    #[test]
    fn wals_without_links_still_refuse_damage_before_later_records() {
        let (mut five, ends) = wal(None, 1..11);
        let (six, _) = wal(None, 11..21);
        five.truncate(ends[6] as usize + 5);
        let (result, _) = run(
            vec![(5, five), (6, six)],
            RecoveryMode::TolerateCorruptedTail,
        );
        assert!(
            matches!(result, Err(Error::Corruption { ref reason, .. }) if reason.contains("later WAL")),
            "{result:?}"
        );
    }
}
