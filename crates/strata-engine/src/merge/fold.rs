//! Folding merge operands in flushes and compactions: the operands of one key within one
//! snapshot stripe become one entry, so reads find fewer and merges write fewer.
//!
//! Within a stripe no snapshot can tell the operands apart, so they fold; across a stripe
//! boundary they must not (a snapshot between two operands reads the older alone). The result:
//! - a put, `full_merge(base, operands)`, when the stripe holds the key's base (a put, or a
//!   delete or a version a range tombstone or the TTL removed, meaning no value), or when no
//!   older version of the key is left in the merge and no table below the output may hold one;
//! - else one operand, the operands combined by `partial_merge`, when the operator combines
//!   each pair;
//! - else the operands as they are.
//!
//! The result keeps the newest operand's sequence number.

use super::{MergeError, MergeFilter, OutputWriter};
use crate::error::Error;
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::{self, SeqNo, ValueKind};
use crate::merge_operator::MergeOperator;
use crate::user_iter::full_merge;

/// Splits an internal key, a malformed one being an input error.
fn parse(ikey: &[u8]) -> Result<(&[u8], SeqNo, ValueKind), MergeError> {
    key::parse_internal_key(ikey)
        .ok_or_else(|| MergeError::Input(Error::corruption("merge", 0, "malformed internal key")))
}

/// Folds the operands of the key whose newest entry of its stripe, a merge operand the filter
/// kept, is under `merged`'s cursor, and writes the result to `out`. Leaves the cursor after
/// what it folded (an older version it did not take, if any, is the filter's to drop or keep);
/// returns the entries read.
pub(crate) fn fold(
    merged: &mut MergingIterator,
    filter: &MergeFilter,
    operator: &dyn MergeOperator,
    out: &mut OutputWriter<'_>,
) -> Result<u64, MergeError> {
    let (user_key, seq, _) = parse(merged.key())?;
    let user_key = user_key.to_vec();
    let stripe = filter.stripe_of(seq);
    // Newest first, with their internal keys (kept as they are if nothing folds).
    let mut operands: Vec<(Vec<u8>, Vec<u8>)> =
        vec![(merged.key().to_vec(), merged.value().to_vec())];
    // `Some(base)` once the stripe showed the key's base; `Some(None)`: no value.
    let mut base: Option<Option<Vec<u8>>> = None;
    let mut read = 1;
    merged.next().map_err(MergeError::Input)?;
    let mut older_in_merge = false;
    while merged.valid() {
        let (k, s, kind) = parse(merged.key())?;
        if k != user_key.as_slice() {
            break;
        }
        if filter.stripe_of(s) != stripe {
            older_in_merge = true;
            break;
        }
        if filter.deleted(k, s, stripe) {
            // Gone: no value below the operands. The filter drops the entry itself.
            base = Some(None);
            break;
        }
        read += 1;
        match kind {
            ValueKind::Merge => operands.push((merged.key().to_vec(), merged.value().to_vec())),
            ValueKind::Put => base = Some(Some(merged.value().to_vec())),
            ValueKind::Delete => base = Some(None),
        }
        merged.next().map_err(MergeError::Input)?;
        if base.is_some() {
            break;
        }
    }
    let base = match base {
        Some(base) => Some(base),
        None if !older_in_merge && !filter.older_may_hold(&user_key) => Some(None),
        None => None,
    };
    let newest = operands[0].0.clone();
    let write = |out: &mut OutputWriter<'_>, ikey: &[u8], value: &[u8]| {
        out.add(ikey, value).map_err(MergeError::Output)
    };
    if let Some(base) = base {
        let oldest_first: Vec<Vec<u8>> = operands.into_iter().rev().map(|(_, v)| v).collect();
        let value = full_merge(operator, &user_key, base.as_deref(), &oldest_first)
            .map_err(MergeError::Output)?;
        let ikey = key::internal_key(&user_key, seq, ValueKind::Put);
        write(out, &ikey, &value)?;
        return Ok(read);
    }
    // Oldest first, combined pairwise while the operator can.
    let mut combined: Option<Vec<u8>> = None;
    for (_, operand) in operands.iter().rev() {
        combined = match combined {
            None => Some(operand.clone()),
            Some(older) => match operator.partial_merge(&user_key, &older, operand) {
                Some(both) => Some(both),
                None => {
                    for (ikey, value) in &operands {
                        write(out, ikey, value)?;
                    }
                    return Ok(read);
                }
            },
        };
    }
    write(out, &newest, combined.as_deref().unwrap_or_default())?;
    Ok(read)
}
