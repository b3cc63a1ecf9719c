//! A compaction policy's persisted state.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The state a compaction policy keeps between decisions (counters, cursors, learned thresholds, a
/// solved schedule), stored in the version as compact JSON.
///
/// The metadata layer treats it as opaque data: edits carry it and recovery restores it, so no
/// policy logic ever runs during recovery. Each policy defines its own serde type and uses
/// [`PolicyState::encode`] / [`PolicyState::decode`]. The empty state means "never set"; policies
/// treat it as their initial state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PolicyState(String);

impl PolicyState {
    /// The empty state.
    pub fn empty() -> Self {
        PolicyState(String::new())
    }

    /// Whether no state was ever set.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Serializes a policy's state value.
    pub fn encode<T: Serialize>(value: &T) -> Result<Self, serde_json::Error> {
        serde_json::to_string(value).map(PolicyState)
    }

    /// Deserializes the state; `Ok(None)` when the state is empty.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<Option<T>, serde_json::Error> {
        if self.0.is_empty() {
            Ok(None)
        } else {
            serde_json::from_str(&self.0).map(Some)
        }
    }

    /// The raw JSON text ("" when empty).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Wraps raw JSON text, checking that it is one line of valid JSON; surrounding whitespace is
    /// dropped, as the text form would drop it.
    pub fn from_json(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(PolicyState::empty());
        }
        if text.contains('\n') {
            return Err("policy state must be a single line".to_string());
        }
        serde_json::from_str::<serde_json::Value>(text)
            .map_err(|e| format!("policy state is not valid JSON: {e}"))?;
        Ok(PolicyState(text.to_string()))
    }
}

impl fmt::Display for PolicyState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Counters {
        c: Vec<i64>,
    }

    #[test]
    fn state_round_trips_and_empty_decodes_to_none() {
        let s = PolicyState::encode(&Counters { c: vec![3, -1] }).unwrap();
        assert_eq!(
            s.decode::<Counters>().unwrap(),
            Some(Counters { c: vec![3, -1] })
        );
        assert_eq!(PolicyState::empty().decode::<Counters>().unwrap(), None);
        assert!(PolicyState::from_json("{\"c\":[1]}").is_ok());
        assert!(PolicyState::from_json("{oops").is_err());
        assert!(s.decode::<String>().is_err());
    }
}
