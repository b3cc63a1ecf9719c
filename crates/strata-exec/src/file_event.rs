//! The file events a storage device sees from an LSM tree: files created, appended to, cut
//! short and deleted (a delete trims the file's space). The engine records them through its
//! file system seam and the simulator's FTL model (`docs/scale.md`) replays them; one text
//! line each:
//!
//! ```text
//! c 7          file 7 created (empty)
//! a 7 65536    65,536 bytes appended to file 7
//! t 7 4096     file 7 cut to 4,096 bytes
//! d 7          file 7 deleted
//! ```
//!
//! Files are numbered by the recorder in order of creation (a rename keeps the number; a file a
//! rename replaces is deleted first).

use std::fmt;
use std::str::FromStr;

/// One event of a device's file trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileEvent {
    /// A new, empty file.
    Create(u64),
    /// Bytes appended to a file.
    Append(u64, u64),
    /// A file cut to a length (its space past it trimmed).
    Truncate(u64, u64),
    /// A file deleted (its space trimmed).
    Delete(u64),
}

impl fmt::Display for FileEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileEvent::Create(id) => write!(f, "c {id}"),
            FileEvent::Append(id, bytes) => write!(f, "a {id} {bytes}"),
            FileEvent::Truncate(id, len) => write!(f, "t {id} {len}"),
            FileEvent::Delete(id) => write!(f, "d {id}"),
        }
    }
}

impl FromStr for FileEvent {
    type Err = String;

    fn from_str(line: &str) -> Result<FileEvent, String> {
        let mut words = line.split_whitespace();
        let kind = words.next().ok_or("an empty line")?;
        let mut number = |what: &str| -> Result<u64, String> {
            let word = words
                .next()
                .ok_or_else(|| format!("{line:?} has no {what}"))?;
            word.parse()
                .map_err(|_| format!("{line:?}: {what} {word:?} is not a number"))
        };
        let event = match kind {
            "c" => FileEvent::Create(number("file number")?),
            "a" => FileEvent::Append(number("file number")?, number("byte count")?),
            "t" => FileEvent::Truncate(number("file number")?, number("length")?),
            "d" => FileEvent::Delete(number("file number")?),
            other => return Err(format!("{line:?}: {other:?} is no event (c, a, t or d)")),
        };
        match words.next() {
            Some(extra) => Err(format!("{line:?}: {extra:?} after the event")),
            None => Ok(event),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_through_their_text() {
        for event in [
            FileEvent::Create(7),
            FileEvent::Append(7, 65_536),
            FileEvent::Truncate(7, 4096),
            FileEvent::Delete(u64::MAX),
        ] {
            assert_eq!(event.to_string().parse::<FileEvent>(), Ok(event));
        }
    }

    #[test]
    fn bad_lines_say_what_is_wrong() {
        let err = |line: &str| line.parse::<FileEvent>().unwrap_err();
        assert!(err("").contains("empty"));
        assert!(err("x 1").contains("\"x\" is no event"));
        assert!(err("a 1").contains("no byte count"));
        assert!(err("a 1 lots").contains("\"lots\" is not a number"));
        assert!(err("d 1 2").contains("\"2\" after the event"));
    }
}
