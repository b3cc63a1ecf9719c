//! The side logs: each worker thread's log of write intents (`I`, or `N` for writes left out of
//! the WAL), acknowledgements (`A`), resolutions (`X`: an in-flight intent that did not happen;
//! `F`: what a verification found a key to hold), written one line at a time, and their replay
//! into what the database must hold.

use anyhow::{bail, Context, Result};
use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// One write intent: its keys and new values (`None` = delete).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Intent {
    pub(crate) seq: u64,
    pub(crate) writes: Vec<(String, Option<String>)>,
    /// With a TTL (`crate::expiry`), the clock's second before the write was issued, logged
    /// as `@second` before the writes; 0 otherwise.
    pub(crate) second: u64,
}

/// A thread's side log: intents, acknowledgements and resolutions, one line each.
pub(crate) struct SideLog {
    file: File,
}

impl SideLog {
    pub(crate) fn open(path: &Path) -> Result<SideLog> {
        // A kill can cut even a one-line write short where the file crosses a page boundary
        // (the kernel stops between pages once a fatal signal is pending). Replay ignores such
        // a torn last line; drop it before appending, or the next line is glued to it (seen
        // as "A 1X 15254" after a kill cut "A 15254" at "A 1").
        match std::fs::read(path) {
            Ok(text) => {
                let keep = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
                if keep < text.len() {
                    OpenOptions::new()
                        .write(true)
                        .open(path)
                        .and_then(|f| f.set_len(keep as u64))
                        .with_context(|| format!("cutting the torn tail of {}", path.display()))?;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("opening side log {}", path.display()))?;
        Ok(SideLog { file })
    }

    /// Appends one line with a single write, so a kill cannot interleave or reorder lines.
    pub(crate) fn line(&mut self, text: &str) -> Result<()> {
        let mut buf = text.as_bytes().to_vec();
        buf.push(b'\n');
        self.file.write_all(&buf).context("writing the side log")
    }

    /// Logs `i` before it is issued: tagged `I`, or `N` for a write left out of the WAL
    /// (`unlogged`), which a kill may lose.
    pub(crate) fn intent(&mut self, i: &Intent, unlogged: bool) -> Result<()> {
        let parts: Vec<String> = i
            .writes
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_deref().unwrap_or("~")))
            .collect();
        let tag = if unlogged { "N" } else { "I" };
        let second = if i.second > 0 {
            format!("@{} ", i.second)
        } else {
            String::new()
        };
        self.line(&format!("{tag} {} {second}{}", i.seq, parts.join(";")))
    }

    /// Logs what a verification found `key` to hold, which settles what writes left out of the
    /// WAL may have lost.
    pub(crate) fn found(&mut self, key: &str, value: Option<&str>) -> Result<()> {
        self.line(&format!("F {key}={}", value.unwrap_or("~")))
    }
}

/// What a side log says about one thread's keys.
#[derive(Debug, Default)]
pub(crate) struct Replayed {
    /// Value of each key after every acknowledged write.
    pub(crate) model: BTreeMap<String, Option<String>>,
    /// With a TTL, the second each key's last acknowledged write was logged with
    /// ([`Intent::second`]).
    pub(crate) written: BTreeMap<String, u64>,
    /// The last intent, if it was never acknowledged nor resolved.
    pub(crate) in_flight: Option<Intent>,
    /// Whether the in-flight intent was left out of the WAL.
    pub(crate) in_flight_unlogged: bool,
    /// Values a key may hold instead of the model's: those it had since its last logged write,
    /// which a kill may roll back to where acknowledged writes left out of the WAL are lost.
    pub(crate) uncertain: BTreeMap<String, Vec<Option<String>>>,
    /// Next sequence number to use.
    pub(crate) next_seq: u64,
    /// Acknowledged writes in the log.
    pub(crate) acked: u64,
    /// The acknowledged writes in order (a thread waits for each before the next).
    pub(crate) history: Vec<Intent>,
}

fn parse_intent(rest: &str) -> Option<Intent> {
    let (seq, body) = rest.split_once(' ')?;
    let seq = seq.parse().ok()?;
    let (second, body) = match body.strip_prefix('@') {
        Some(timed) => {
            let (second, body) = timed.split_once(' ').unwrap_or((timed, ""));
            (second.parse().ok()?, body)
        }
        None => (0, body),
    };
    let mut writes = Vec::new();
    for part in body.split(';').filter(|p| !p.is_empty()) {
        let (k, v) = part.split_once('=')?;
        writes.push((k.to_string(), (v != "~").then(|| v.to_string())));
    }
    Some(Intent {
        seq,
        writes,
        second,
    })
}

/// Replays a side log. A last line without a newline was cut by the kill and is ignored: its
/// intent was never issued (intents are logged before the write starts).
pub(crate) fn replay(path: &Path) -> Result<Replayed> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let complete = match text.rfind('\n') {
        Some(i) => &text[..=i],
        None => "",
    };
    let mut r = Replayed::default();
    // Intents not yet acknowledged or resolved, with whether each was left out of the WAL.
    let mut pending: HashMap<u64, (Intent, bool)> = HashMap::new();
    for line in complete.lines() {
        let (tag, rest) = line.split_at(line.len().min(2));
        match tag.trim() {
            tag @ ("I" | "N") => {
                let i = parse_intent(rest).with_context(|| format!("bad intent line {line:?}"))?;
                r.next_seq = r.next_seq.max(i.seq + 1);
                pending.insert(i.seq, (i, tag == "N"));
            }
            "A" => {
                let seq: u64 = rest
                    .trim()
                    .parse()
                    .with_context(|| format!("bad line {line:?}"))?;
                if let Some((i, unlogged)) = pending.remove(&seq) {
                    for (k, v) in &i.writes {
                        r.written.insert(k.clone(), i.second);
                        let before = r.model.insert(k.clone(), v.clone()).flatten();
                        if unlogged {
                            r.uncertain.entry(k.clone()).or_default().push(before);
                        } else {
                            // A logged write survives a kill, and so does what it replaced.
                            r.uncertain.remove(k);
                        }
                    }
                    r.acked += 1;
                    r.history.push(i);
                }
            }
            "F" => {
                let (k, v) = rest
                    .trim()
                    .split_once('=')
                    .with_context(|| format!("bad line {line:?}"))?;
                r.model
                    .insert(k.to_string(), (v != "~").then(|| v.to_string()));
                r.uncertain.remove(k);
            }
            "X" => {
                let seq: u64 = rest
                    .trim()
                    .parse()
                    .with_context(|| format!("bad line {line:?}"))?;
                pending.remove(&seq);
            }
            _ => bail!("unexpected side-log line {line:?} in {}", path.display()),
        }
    }
    if pending.len() > 1 {
        bail!(
            "{} has {} unresolved intents; a thread has at most one in flight",
            path.display(),
            pending.len()
        );
    }
    if let Some((i, unlogged)) = pending.into_values().next() {
        r.in_flight = Some(i);
        r.in_flight_unlogged = unlogged;
    }
    Ok(r)
}

pub(crate) fn side_log_dir(dir: &Path) -> PathBuf {
    let mut s = dir.as_os_str().to_owned();
    s.push(".log");
    PathBuf::from(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torn_side_log_line_is_cut_before_the_next_append() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("thread-00.log");
        // A kill cut "A 15254" short after "A 1".
        std::fs::write(&path, "I 15254 k=~\nA 1").unwrap();
        let mut log = SideLog::open(&path).unwrap();
        log.line("X 15254").unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "I 15254 k=~\nX 15254\n"
        );
        let replayed = replay(&path).unwrap();
        assert_eq!(replayed.acked, 0, "the cut acknowledgement does not count");
        // A log that ends with a whole line is left alone.
        drop(log);
        SideLog::open(&path).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "I 15254 k=~\nX 15254\n"
        );
    }

    #[test]
    fn an_intent_carries_its_second_through_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("thread-00.log");
        let mut log = SideLog::open(&path).unwrap();
        let writes = vec![("k".to_string(), Some("v".to_string()))];
        log.intent(
            &Intent {
                seq: 3,
                writes,
                second: 17_000_000_001,
            },
            false,
        )
        .unwrap();
        log.line("A 3").unwrap();
        log.intent(
            &Intent {
                seq: 4,
                writes: Vec::new(),
                second: 17_000_000_002,
            },
            false,
        )
        .unwrap();
        let replayed = replay(&path).unwrap();
        assert_eq!(replayed.written["k"], 17_000_000_001);
        assert_eq!(replayed.model["k"].as_deref(), Some("v"));
        let in_flight = replayed.in_flight.unwrap();
        assert_eq!((in_flight.seq, in_flight.second), (4, 17_000_000_002));
        assert!(in_flight.writes.is_empty());
    }
}
