//! Integer encodings used inside table files: LEB128 varints and little-endian fixed-width
//! integers. Decoders are total: malformed or truncated input gives `None`, never a panic.

/// Appends `value` as a LEB128 varint (7 bits per byte, low bits first, high bit = "more").
#[inline]
pub(crate) fn put_varint(buf: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        buf.push((value as u8) | 0x80);
        value >>= 7;
    }
    buf.push(value as u8);
}

/// Decodes the varint at `*pos` and advances `*pos` past it; `None` if it is truncated or does
/// not fit in 64 bits.
#[inline]
pub(crate) fn get_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut result = 0u64;
    let mut shift = 0u32;
    loop {
        let byte = *buf.get(*pos)?;
        *pos += 1; // cannot overflow: `*pos` indexed an existing byte
        if shift == 63 && byte > 1 {
            // The tenth byte may carry only the top bit of a u64, and must end the varint.
            return None;
        }
        result |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(result);
        }
        shift += 7;
    }
}

/// The little-endian u32 at `pos`, if the buffer holds four bytes there.
#[inline]
pub(crate) fn get_u32_le(buf: &[u8], pos: usize) -> Option<u32> {
    let b = buf.get(pos..pos.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// The little-endian u64 at `pos`, if the buffer holds eight bytes there.
#[inline]
pub(crate) fn get_u64_le(buf: &[u8], pos: usize) -> Option<u64> {
    let b = buf.get(pos..pos.checked_add(8)?)?;
    Some(u64::from_le_bytes([
        b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
    ]))
}

/// A forward reader over a byte slice whose every method fails softly at the end of input.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Bytes consumed so far.
    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    /// Whether every byte was consumed.
    pub(crate) fn is_at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// The next varint.
    pub(crate) fn varint(&mut self) -> Option<u64> {
        get_varint(self.buf, &mut self.pos)
    }

    /// The next varint, which must fit in a `usize`.
    pub(crate) fn varint_usize(&mut self) -> Option<usize> {
        usize::try_from(self.varint()?).ok()
    }

    /// The next `n` bytes.
    pub(crate) fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let out = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_reject_overlong_input() {
        let samples = [0u64, 1, 127, 128, 300, 1 << 35, u64::MAX - 1, u64::MAX];
        for &v in &samples {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            let expected_len = if v == 0 {
                1
            } else {
                (64 - v.leading_zeros() as usize).div_ceil(7)
            };
            assert_eq!(buf.len(), expected_len, "length of {v}");
            let mut pos = 0;
            assert_eq!(get_varint(&buf, &mut pos), Some(v));
            assert_eq!(pos, buf.len());
            // Every strict prefix is truncated input.
            for cut in 0..buf.len() {
                let mut pos = 0;
                assert_eq!(get_varint(&buf[..cut], &mut pos), None);
            }
        }
        // Eleven bytes, or a tenth byte above 1, do not fit in 64 bits.
        let mut pos = 0;
        assert_eq!(get_varint(&[0xff; 11], &mut pos), None);
        let mut too_big = vec![0xff; 9];
        too_big.push(0x02);
        let mut pos = 0;
        assert_eq!(get_varint(&too_big, &mut pos), None);
    }

    #[test]
    fn reader_stops_at_the_end() {
        let mut r = Reader::new(&[1, 2, 3, 4, 5]);
        assert_eq!(r.bytes(4), Some(&[1u8, 2, 3, 4][..]));
        assert_eq!(r.position(), 4);
        assert_eq!(r.bytes(2), None);
        assert_eq!(r.bytes(1), Some(&[5u8][..]));
        assert!(r.is_at_end());
        assert_eq!(r.varint(), None);
        assert_eq!(get_u32_le(&[1, 2, 3, 4, 5], 1), Some(0x0504_0302));
        assert_eq!(get_u32_le(&[1, 2, 3, 4, 5], 2), None);
        assert_eq!(get_u64_le(&[0; 7], 0), None);
        assert_eq!(get_u64_le(&[0; 8], usize::MAX), None);
    }
}
