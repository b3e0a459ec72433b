//! Response frames as a list of chunks, so a Fetch or ShareFetch response's record batches go
//! to the socket from the buffers they already live in (the batch cache, a disk read) instead
//! of being copied into the encoded frame.
//!
//! How: each partition's `records` is swapped for a 16-byte sentinel unique to this call, the
//! response is encoded by `kafka-protocol` as usual (small: no record data), each sentinel is
//! found in the output and its length prefix rewritten for the real records (INT32 before
//! flexible versions, an unsigned varint of length + 1 from Fetch v12 and in every ShareFetch,
//! KIP-482), and the frame becomes
//! `[encoded bytes up to the records][records][encoded bytes up to the next records]...`.
//! No byte outside a records field depends on its length (Kafka's encoding has no enclosing
//! byte counts besides the frame's own, which is recomputed), so the frame is byte-for-byte what
//! the plain encoder would produce (tested). When a sentinel is not found exactly once where
//! expected, the plain encoder is used instead.

use crate::protocol::{encode_response, FRAME_PREFIX_BYTES};
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, ResponseKind};

const SENTINEL_BYTES: usize = 16;
/// Records smaller than this are copied into the frame (one write beats a copy of a few KiB).
pub const SPLICE_BYTES_MIN: usize = 16 * 1024;
const _: () = assert!(SPLICE_BYTES_MIN > SENTINEL_BYTES);
/// First flexible Fetch version (compact records length).
const FETCH_FLEXIBLE_VERSION: i16 = 12;

/// The records field of every partition of a Fetch or ShareFetch response, in encoding order.
macro_rules! records_of {
    ($fetch:expr) => {
        $fetch
            .responses
            .iter_mut()
            .flat_map(|topic| topic.partitions.iter_mut())
            .map(|partition| &mut partition.records)
            .collect()
    };
}

/// The records fields of a Fetch or ShareFetch response, in encoding order, and whether their
/// lengths are compact (flexible versions); `None` for any other response.
fn records_fields(
    response: &mut ResponseKind,
    version: i16,
) -> Option<(Vec<&mut Option<Bytes>>, bool)> {
    match response {
        ResponseKind::Fetch(fetch) => Some((records_of!(fetch), version >= FETCH_FLEXIBLE_VERSION)),
        // ShareFetch is flexible at every version.
        ResponseKind::ShareFetch(fetch) => Some((records_of!(fetch), true)),
        _ => None,
    }
}

/// Encodes a response frame (length prefix included) as chunks to write in order.
pub fn encode_response_chunks(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    mut response: ResponseKind,
) -> Result<Vec<Bytes>, String> {
    let Some((fields, flexible)) = records_fields(&mut response, version) else {
        return Ok(vec![encode_response(api_key, version, correlation_id, &response)?.freeze()]);
    };
    // A fresh random key per call (std's RandomState is randomly seeded).
    let salt: u64 = {
        use std::hash::{BuildHasher, Hasher};
        std::collections::hash_map::RandomState::new().build_hasher().finish()
    };
    let mut taken: Vec<([u8; SENTINEL_BYTES], Bytes)> = Vec::new();
    for records in fields.into_iter().flatten() {
        if records.len() < SPLICE_BYTES_MIN {
            continue; // copying is cheaper than another write for small records
        }
        let mut sentinel = [0u8; SENTINEL_BYTES];
        let (key, index) = sentinel.split_at_mut(8);
        key.copy_from_slice(&salt.to_be_bytes());
        index.copy_from_slice(&(taken.len() as u64).to_be_bytes());
        let real = std::mem::replace(records, Bytes::copy_from_slice(&sentinel));
        taken.push((sentinel, real));
    }
    if taken.is_empty() {
        return Ok(vec![encode_response(api_key, version, correlation_id, &response)?.freeze()]);
    }
    let encoded = encode_response(api_key, version, correlation_id, &response)?.freeze();
    match splice(&encoded, &taken, flexible) {
        Some(chunks) => Ok(chunks),
        None => {
            // Put the records back and encode plainly.
            let mut originals = taken.into_iter().map(|(_, real)| real);
            if let Some((fields, _)) = records_fields(&mut response, version) {
                for records in fields.into_iter().flatten() {
                    if records.len() == SENTINEL_BYTES {
                        if let Some(real) = originals.next() {
                            *records = real;
                        }
                    }
                }
            }
            Ok(vec![encode_response(api_key, version, correlation_id, &response)?.freeze()])
        }
    }
}

/// The chunks of the real frame, or `None` when a sentinel is missing, repeated or not
/// preceded by the length prefix a 16-byte records field has.
fn splice(
    encoded: &Bytes,
    taken: &[([u8; SENTINEL_BYTES], Bytes)],
    flexible: bool,
) -> Option<Vec<Bytes>> {
    let old_prefix: Vec<u8> = if flexible {
        varint(SENTINEL_BYTES as u32 + 1)
    } else {
        (SENTINEL_BYTES as i32).to_be_bytes().to_vec()
    };
    let mut chunks = Vec::with_capacity(taken.len() * 2 + 1);
    let mut cursor = FRAME_PREFIX_BYTES; // the frame length is rewritten at the end
    let mut head = BytesMut::with_capacity(256);
    head.put_slice(&[0; FRAME_PREFIX_BYTES]);
    let mut frame_len: usize = 0;
    for (sentinel, records) in taken {
        let rest = encoded.get(cursor..)?;
        let at = find_once(rest, sentinel)? + cursor;
        let prefix_start = at.checked_sub(old_prefix.len())?;
        if prefix_start < cursor || encoded.get(prefix_start..at)? != old_prefix.as_slice() {
            return None;
        }
        head.put_slice(encoded.get(cursor..prefix_start)?);
        if flexible {
            head.put_slice(&varint(u32::try_from(records.len()).ok()?.checked_add(1)?));
        } else {
            head.put_slice(&i32::try_from(records.len()).ok()?.to_be_bytes());
        }
        frame_len += head.len();
        chunks.push(std::mem::replace(&mut head, BytesMut::with_capacity(256)).freeze());
        frame_len += records.len();
        chunks.push(records.clone());
        cursor = at + SENTINEL_BYTES;
    }
    head.put_slice(encoded.get(cursor..)?);
    frame_len += head.len();
    chunks.push(head.freeze());
    // The first chunk starts with the frame length (excluding the prefix itself).
    let length = i32::try_from(frame_len - FRAME_PREFIX_BYTES).ok()?;
    let first = chunks.first_mut()?;
    let mut rewritten = BytesMut::from(first.as_ref());
    rewritten.get_mut(..FRAME_PREFIX_BYTES)?.copy_from_slice(&length.to_be_bytes());
    *first = rewritten.freeze();
    Some(chunks)
}

/// The position of the only occurrence of `needle` in `haystack`.
fn find_once(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    let mut found = haystack.windows(needle.len()).enumerate().filter(|(_, w)| *w == needle);
    let (first, _) = found.next()?;
    found.next().is_none().then_some(first)
}

/// Kafka's unsigned varint (compact lengths).
fn varint(value: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(5);
    crate::varint::put_unsigned_varint(&mut out, u64::from(value));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
    use kafka_protocol::messages::{FetchResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;

    fn response(records: &[Option<Bytes>]) -> ResponseKind {
        let mut topic = FetchableTopicResponse::default();
        topic.topic = TopicName(StrBytes::from_static_str("orders"));
        for (index, records) in records.iter().enumerate() {
            let mut partition = PartitionData::default();
            partition.partition_index = index as i32;
            partition.high_watermark = 1_000 + index as i64;
            partition.records = records.clone();
            topic.partitions.push(partition);
        }
        let mut fetch = FetchResponse::default();
        fetch.responses = vec![topic];
        ResponseKind::Fetch(fetch)
    }

    fn joined(chunks: &[Bytes]) -> Vec<u8> {
        chunks.iter().flat_map(|chunk| chunk.iter().copied()).collect()
    }

    #[test]
    fn chunks_are_byte_for_byte_the_plain_encoding_at_every_version() {
        let big = Bytes::from((0..300_000u32).map(|i| (i % 251) as u8).collect::<Vec<u8>>());
        let mid = Bytes::from(vec![7u8; SPLICE_BYTES_MIN + 1]);
        let cases = [
            vec![Some(big.clone())],
            vec![
                Some(mid.clone()),
                None,
                Some(Bytes::new()),
                Some(big.clone()),
                Some(Bytes::from_static(b"tiny")),
            ],
            vec![None],
            vec![
                Some(Bytes::from(vec![0u8; 127])),
                Some(Bytes::from(vec![1u8; 128])),
                Some(Bytes::from(vec![2u8; 16_383])),
            ],
        ];
        for version in 4..=16 {
            for case in &cases {
                let plain =
                    encode_response(ApiKey::Fetch, version, 42, &response(case)).expect("plain");
                let chunks = encode_response_chunks(ApiKey::Fetch, version, 42, response(case))
                    .expect("chunks");
                assert_eq!(joined(&chunks), plain.to_vec(), "v{version}");
            }
        }
    }

    fn share_response(records: &[Option<Bytes>]) -> ResponseKind {
        use kafka_protocol::messages::share_fetch_response::{
            AcquiredRecords, PartitionData, ShareFetchableTopicResponse,
        };
        let mut topic = ShareFetchableTopicResponse::default();
        for (index, records) in records.iter().enumerate() {
            let mut partition = PartitionData::default();
            partition.partition_index = index as i32;
            partition.records = records.clone();
            let mut acquired = AcquiredRecords::default();
            acquired.first_offset = 10 * index as i64;
            acquired.last_offset = 10 * index as i64 + 9;
            acquired.delivery_count = 1;
            partition.acquired_records = vec![acquired];
            topic.partitions.push(partition);
        }
        let mut fetch = kafka_protocol::messages::ShareFetchResponse::default();
        fetch.responses = vec![topic];
        ResponseKind::ShareFetch(fetch)
    }

    #[test]
    fn share_fetch_chunks_are_the_plain_encoding_and_do_not_copy_records() {
        let big = Bytes::from((0..300_000u32).map(|i| (i % 249) as u8).collect::<Vec<u8>>());
        let mid = Bytes::from(vec![5u8; SPLICE_BYTES_MIN + 1]);
        let cases = [
            vec![Some(big.clone())],
            vec![Some(mid.clone()), None, Some(Bytes::from_static(b"tiny")), Some(big.clone())],
            vec![None],
        ];
        for version in [1] {
            for case in &cases {
                let plain = encode_response(ApiKey::ShareFetch, version, 7, &share_response(case))
                    .expect("plain");
                let chunks =
                    encode_response_chunks(ApiKey::ShareFetch, version, 7, share_response(case))
                        .expect("chunks");
                assert_eq!(joined(&chunks), plain.to_vec(), "v{version}");
            }
        }
        let chunks =
            encode_response_chunks(ApiKey::ShareFetch, 1, 7, share_response(&[Some(big.clone())]))
                .expect("chunks");
        assert!(chunks
            .iter()
            .any(|chunk| chunk.as_ptr() == big.as_ptr() && chunk.len() == big.len()));
    }

    #[test]
    fn record_bytes_are_not_copied() {
        let big = Bytes::from(vec![9u8; 100_000]);
        let chunks = encode_response_chunks(ApiKey::Fetch, 12, 1, response(&[Some(big.clone())]))
            .expect("chunks");
        assert!(chunks
            .iter()
            .any(|chunk| chunk.as_ptr() == big.as_ptr() && chunk.len() == big.len()));
    }

    #[test]
    fn small_records_stay_in_one_chunk() {
        let small =
            response(&[Some(Bytes::from(vec![0u8; 100])), Some(Bytes::from(vec![1u8; 2000]))]);
        let chunks = encode_response_chunks(ApiKey::Fetch, 12, 1, small.clone()).expect("chunks");
        assert_eq!(chunks.len(), 1);
        let plain = encode_response(ApiKey::Fetch, 12, 1, &small).expect("plain");
        assert_eq!(joined(&chunks), plain.to_vec());
    }
}
