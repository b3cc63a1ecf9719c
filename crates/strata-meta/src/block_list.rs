//! How a table's per-block metadata ([`TableMeta::blocks`](crate::TableMeta::blocks)) is
//! written in JSON (the engine's manifest, reports): one string, the blocks in postcard's compact
//! binary form (integers as varints, keys as their bytes) in base64.
//!
//! Why not JSON's own form: a block is two keys and four numbers, and JSON writes a key's bytes
//! as an array of numbers, about 168 bytes per block for 16-byte keys. A manifest snapshot of a
//! block-granular policy's 290 MB tree then held 90,815 blocks in 15.3 MB, and building it took
//! 33.9 MB of memory at once, which a process held to 64 MiB could not spare. This form takes
//! about a third of that. Reading also accepts the JSON array form, which manifests written
//! before it hold.

use crate::table::BlockMeta;
use base64::Engine as _;
use serde::{Deserialize, Deserializer, Serializer};
use std::sync::Arc;

/// Writes `blocks` as one base64 string of their postcard form, or null.
pub fn serialize<S: Serializer>(
    blocks: &Option<Arc<[BlockMeta]>>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match blocks {
        None => serializer.serialize_none(),
        Some(blocks) => {
            let binary = postcard::to_allocvec(&**blocks).map_err(serde::ser::Error::custom)?;
            serializer.serialize_some(&base64::engine::general_purpose::STANDARD.encode(binary))
        }
    }
}

/// The two forms a block list is read in.
#[derive(Deserialize)]
#[serde(untagged)]
enum Written {
    /// Base64 of the postcard form, as [`serialize`] writes it.
    Compact(String),
    /// JSON's own form, as manifests written before the compact form hold.
    Json(Vec<BlockMeta>),
}

/// Reads a block list in either form.
pub fn deserialize<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Arc<[BlockMeta]>>, D::Error> {
    let Some(written) = Option::<Written>::deserialize(deserializer)? else {
        return Ok(None);
    };
    let blocks = match written {
        Written::Json(blocks) => blocks,
        Written::Compact(text) => {
            let binary = base64::engine::general_purpose::STANDARD
                .decode(text)
                .map_err(|e| serde::de::Error::custom(format!("block list: {e}")))?;
            postcard::from_bytes(&binary)
                .map_err(|e| serde::de::Error::custom(format!("block list: {e}")))?
        }
    };
    Ok(Some(blocks.into()))
}

#[cfg(test)]
mod tests {
    use crate::table::{BlockMeta, TableId, TableMeta};
    use bytes::Bytes;

    fn table() -> TableMeta {
        let mut t = TableMeta::new(7, &b"a"[..], &b"z"[..], 8300);
        t.blocks = Some(
            (0..100u64)
                .map(|i| BlockMeta {
                    smallest: Bytes::from(format!("key{:013}", 2 * i)),
                    largest: Bytes::from(format!("key{:013}", 2 * i + 1)),
                    size: 4150,
                    entries: 33,
                    file: TableId(if i % 3 == 0 { 5 } else { 7 }),
                    offset: 4150 * i,
                })
                .collect::<Vec<_>>()
                .into(),
        );
        t
    }

    #[test]
    fn a_block_list_round_trips_in_a_third_of_the_json_form() {
        let t = table();
        let compact = serde_json::to_string(&t).unwrap();
        assert_eq!(serde_json::from_str::<TableMeta>(&compact).unwrap(), t);
        // The JSON array form, as older manifests hold it, still reads.
        let mut value = serde_json::to_value(&t).unwrap();
        let blocks: Vec<serde_json::Value> = t
            .blocks
            .as_deref()
            .unwrap()
            .iter()
            .map(|b| serde_json::to_value(b).unwrap())
            .collect();
        value["blocks"] = serde_json::Value::Array(blocks);
        let old = serde_json::to_string(&value).unwrap();
        assert_eq!(serde_json::from_str::<TableMeta>(&old).unwrap(), t);
        assert!(
            compact.len() * 5 / 2 < old.len(),
            "{} {}",
            compact.len(),
            old.len()
        );
        // No block list stays null.
        let mut none = t.clone();
        none.blocks = None;
        let text = serde_json::to_string(&none).unwrap();
        assert!(text.contains("\"blocks\":null"));
        assert_eq!(serde_json::from_str::<TableMeta>(&text).unwrap(), none);
    }

    #[test]
    fn a_damaged_block_list_is_an_error_naming_it() {
        let mut value = serde_json::to_value(table()).unwrap();
        value["blocks"] = serde_json::Value::String("not base64!".into());
        let e = serde_json::from_value::<TableMeta>(value)
            .unwrap_err()
            .to_string();
        assert!(e.contains("block list"), "{e}");
    }
}
