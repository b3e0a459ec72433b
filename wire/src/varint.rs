//! Zig-zag varints as Kafka records use them (protobuf style).
//!
//! References: Kafka protocol guide, "Record" (varint and varlong fields).

use crate::error::DecodeError;

/// The longest encoding of a zig-zag varlong (64-bit) value.
pub const VARLONG_BYTES_MAX: usize = 10;

/// Appends `value` as a zig-zag varint (32-bit range is enough for record lengths and deltas).
pub fn put_varint(out: &mut Vec<u8>, value: i32) {
    put_varlong(out, i64::from(value));
}

/// Appends `value` as a zig-zag varlong.
pub fn put_varlong(out: &mut Vec<u8>, value: i64) {
    put_unsigned_varint(out, ((value << 1) ^ (value >> 63)) as u64);
}

/// Appends `value` as an unsigned varint (7 bits a byte, low first): Kafka's compact lengths
/// (KIP-482) use it directly, zig-zag values after the zig-zag step.
pub fn put_unsigned_varint(out: &mut Vec<u8>, mut value: u64) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// The number of bytes `put_varlong(value)` writes.
pub fn varlong_len(value: i64) -> usize {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    let mut len = 1;
    while zigzag >= 0x80 {
        zigzag >>= 7;
        len += 1;
    }
    len
}

/// Reads a zig-zag varlong from the front of `input`, returning the value and the bytes used.
pub fn get_varlong(input: &[u8]) -> Result<(i64, usize), DecodeError> {
    let mut raw: u64 = 0;
    for (index, byte) in input.iter().take(VARLONG_BYTES_MAX).enumerate() {
        raw |= u64::from(byte & 0x7f) << (7 * index);
        if byte & 0x80 == 0 {
            let value = ((raw >> 1) as i64) ^ -((raw & 1) as i64);
            return Ok((value, index + 1));
        }
    }
    if input.len() >= VARLONG_BYTES_MAX {
        Err(DecodeError::VarintTooLong)
    } else {
        Err(DecodeError::Truncated { needed: input.len() + 1, available: input.len() })
    }
}

/// Reads a zig-zag varint that must fit in 32 bits.
pub fn get_varint(input: &[u8]) -> Result<(i32, usize), DecodeError> {
    let (value, used) = get_varlong(input)?;
    let value = i32::try_from(value).map_err(|_| DecodeError::VarintTooLong)?;
    Ok((value, used))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varlong_round_trips_edge_values() {
        for value in [0, 1, -1, 63, -64, 64, 300, -300, i64::from(i32::MAX), i64::MIN, i64::MAX] {
            let mut out = Vec::new();
            put_varlong(&mut out, value);
            assert_eq!(out.len(), varlong_len(value));
            assert_eq!(get_varlong(&out), Ok((value, out.len())));
        }
    }

    #[test]
    fn varint_known_encodings_match_protobuf_zigzag() {
        let mut out = Vec::new();
        put_varint(&mut out, -1);
        put_varint(&mut out, 1);
        put_varint(&mut out, 150);
        assert_eq!(out, vec![0x01, 0x02, 0xac, 0x02]);
    }

    #[test]
    fn truncated_and_overlong_varints_are_errors_not_panics() {
        assert!(matches!(get_varlong(&[0x80, 0x80]), Err(DecodeError::Truncated { .. })));
        assert_eq!(get_varlong(&[0xff; 11]), Err(DecodeError::VarintTooLong));
        assert_eq!(get_varint(&[0xff, 0xff, 0xff, 0xff, 0x7f]), Err(DecodeError::VarintTooLong));
    }
}
