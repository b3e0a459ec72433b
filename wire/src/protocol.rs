//! Kafka request/response framing and (de)coding, on top of the `kafka-protocol` crate's
//! generated message types.
//!
//! Owns: the size-prefixed frame limit (`socket.request.max.bytes`), request-header decoding for
//! header versions 0-2 (flexible versions included), body decoding into `RequestKind`, and
//! response encoding with the right response-header version.
//! Invariants: a frame length is checked against the limit before anything is allocated; no
//! input can panic this module (the generated decoders are additionally run under
//! `catch_unwind`, so a decoder bug becomes a decode error, not a dead shard).
//! References: Kafka protocol guide, "Common Request and Response Structure", KIP-482 (tagged
//! fields, flexible versions), KIP-511 (ApiVersions v3 with client software name).

use bytes::{Bytes, BytesMut};
pub use kafka_protocol::messages::{
    ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind,
};
use kafka_protocol::protocol::{Decodable, Encodable};

/// Kafka's default `socket.request.max.bytes`.
pub const REQUEST_BYTES_MAX_DEFAULT: usize = 100 << 20;
/// Bytes in a frame's length prefix.
pub const FRAME_PREFIX_BYTES: usize = 4;

/// Why a frame or request could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge { len: i64, max: usize },
    #[error("negative or empty frame length {0}")]
    BadLength(i32),
    #[error("request too short for a header ({0} bytes)")]
    ShortHeader(usize),
    #[error("unknown API key {0}")]
    UnknownApiKey(i16),
    #[error("undecodable {api:?} v{version} request: {reason}")]
    Undecodable { api: ApiKey, version: i16, reason: String },
}

/// Reads a frame's length from its 4-byte prefix and checks it against `max`.
pub fn frame_len(prefix: [u8; FRAME_PREFIX_BYTES], max: usize) -> Result<usize, FrameError> {
    let len = i32::from_be_bytes(prefix);
    if len <= 0 {
        return Err(FrameError::BadLength(len));
    }
    if len as usize > max {
        return Err(FrameError::TooLarge { len: i64::from(len), max });
    }
    Ok(len as usize)
}

/// The API key and version at the front of a request, read without decoding the rest.
pub fn peek_api(frame: &[u8]) -> Result<(i16, i16), FrameError> {
    let field = |range: std::ops::Range<usize>| -> Option<i16> {
        frame.get(range).and_then(|bytes| bytes.try_into().ok()).map(i16::from_be_bytes)
    };
    match (field(0..2), field(2..4)) {
        (Some(key), Some(version)) => Ok((key, version)),
        _ => Err(FrameError::ShortHeader(frame.len())),
    }
}

/// A decoded request header plus the still-encoded body.
pub struct RequestFrame {
    pub api_key: ApiKey,
    pub header: RequestHeader,
    pub body: Bytes,
}

fn guarded<T>(decode: impl FnOnce() -> anyhow_like::Result<T>) -> Result<T, String> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(decode)) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err("decoder panicked on malformed input".into()),
    }
}

mod anyhow_like {
    pub type Result<T> = std::result::Result<T, Box<dyn std::fmt::Display>>;
}

/// Decodes the request header at the front of `frame` (the frame without its length prefix).
pub fn decode_header(frame: Bytes) -> Result<RequestFrame, FrameError> {
    let (key, version) = peek_api(&frame)?;
    let api_key = ApiKey::try_from(key).map_err(|_| FrameError::UnknownApiKey(key))?;
    let header_version = api_key.request_header_version(version);
    let mut body = frame;
    let header = guarded(|| {
        RequestHeader::decode(&mut body, header_version)
            .map_err(|e| Box::new(e) as Box<dyn std::fmt::Display>)
    })
    .map_err(|reason| FrameError::Undecodable { api: api_key, version, reason })?;
    Ok(RequestFrame { api_key, header, body })
}

/// Decodes a request body. Bytes after the request are ignored, as Kafka's broker does
/// (librdkafka's Metadata v12, for one, ends with an extra tagged-field section).
pub fn decode_body(api_key: ApiKey, version: i16, body: Bytes) -> Result<RequestKind, FrameError> {
    let mut body = body;
    guarded(|| {
        RequestKind::decode(api_key, &mut body, version)
            .map_err(|e| Box::new(e) as Box<dyn std::fmt::Display>)
    })
    .map_err(|reason| FrameError::Undecodable { api: api_key, version, reason })
}

/// Encodes a whole response frame (length prefix, header, body) for `version` of `api_key`.
pub fn encode_response(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    response: &ResponseKind,
) -> Result<BytesMut, String> {
    let mut out = BytesMut::with_capacity(256);
    out.extend_from_slice(&[0; FRAME_PREFIX_BYTES]);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    // ApiVersions responses always use header v0 (so clients can read them before they know
    // which versions the broker speaks).
    let header_version = api_key.response_header_version(version);
    header.encode(&mut out, header_version).map_err(|e| e.to_string())?;
    response.encode(&mut out, version).map_err(|e| e.to_string())?;
    let len = (out.len() - FRAME_PREFIX_BYTES) as i32;
    if let Some(prefix) = out.get_mut(..FRAME_PREFIX_BYTES) {
        prefix.copy_from_slice(&len.to_be_bytes());
    }
    Ok(out)
}

/// Encodes a request frame (for the CLI, the load generator and tests).
pub fn encode_request(header: &RequestHeader, request: &RequestKind) -> Result<BytesMut, String> {
    let api_key = ApiKey::try_from(header.request_api_key)
        .map_err(|_| format!("unknown API key {}", header.request_api_key))?;
    let version = header.request_api_version;
    let mut out = BytesMut::with_capacity(256);
    out.extend_from_slice(&[0; FRAME_PREFIX_BYTES]);
    header.encode(&mut out, api_key.request_header_version(version)).map_err(|e| e.to_string())?;
    request.encode(&mut out, version).map_err(|e| e.to_string())?;
    let len = (out.len() - FRAME_PREFIX_BYTES) as i32;
    if let Some(prefix) = out.get_mut(..FRAME_PREFIX_BYTES) {
        prefix.copy_from_slice(&len.to_be_bytes());
    }
    Ok(out)
}

/// Decodes a response frame body (without the length prefix) of `version` of `api_key`.
pub fn decode_response(
    api_key: ApiKey,
    version: i16,
    frame: Bytes,
) -> Result<(ResponseHeader, ResponseKind), FrameError> {
    let mut body = frame;
    let header_version = api_key.response_header_version(version);
    let decoded = guarded(|| {
        let header = ResponseHeader::decode(&mut body, header_version)
            .map_err(|e| Box::new(e) as Box<dyn std::fmt::Display>)?;
        let response = ResponseKind::decode(api_key, &mut body, version)
            .map_err(|e| Box::new(e) as Box<dyn std::fmt::Display>)?;
        Ok((header, response))
    })
    .map_err(|reason| FrameError::Undecodable { api: api_key, version, reason })?;
    Ok(decoded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{ApiVersionsRequest, MetadataRequest};
    use kafka_protocol::protocol::StrBytes;

    fn header(key: ApiKey, version: i16, correlation_id: i32) -> RequestHeader {
        RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_static_str("test")))
    }

    #[test]
    fn frame_lengths_are_checked_before_use() {
        assert_eq!(frame_len(100i32.to_be_bytes(), 1000), Ok(100));
        assert!(matches!(frame_len(2000i32.to_be_bytes(), 1000), Err(FrameError::TooLarge { .. })));
        assert_eq!(frame_len((-1i32).to_be_bytes(), 1000), Err(FrameError::BadLength(-1)));
        assert_eq!(frame_len(0i32.to_be_bytes(), 1000), Err(FrameError::BadLength(0)));
    }

    #[test]
    fn requests_round_trip_for_every_api_versions_and_metadata_version() {
        for version in 0..=4 {
            let request = RequestKind::ApiVersions(
                ApiVersionsRequest::default()
                    .with_client_software_name(StrBytes::from_static_str("librdkafka"))
                    .with_client_software_version(StrBytes::from_static_str("2.6.0")),
            );
            let frame = encode_request(&header(ApiKey::ApiVersions, version, 7), &request).unwrap();
            let decoded = decode_header(Bytes::from(frame).slice(4..)).unwrap();
            assert_eq!(decoded.header.correlation_id, 7);
            assert_eq!(decoded.api_key, ApiKey::ApiVersions);
            decode_body(decoded.api_key, version, decoded.body).unwrap();
        }
        for version in 0..=12 {
            let request = RequestKind::Metadata(MetadataRequest::default());
            let frame = encode_request(&header(ApiKey::Metadata, version, 9), &request).unwrap();
            let decoded = decode_header(Bytes::from(frame).slice(4..)).unwrap();
            assert_eq!(decoded.header.correlation_id, 9);
            decode_body(decoded.api_key, version, decoded.body).unwrap();
        }
    }

    #[test]
    fn truncated_and_garbage_requests_are_errors_not_panics() {
        let request = RequestKind::Metadata(MetadataRequest::default());
        let frame = encode_request(&header(ApiKey::Metadata, 9, 1), &request).unwrap();
        let frame = Bytes::from(frame).slice(4..);
        for cut in 0..frame.len() {
            let part = frame.slice(..cut);
            if let Ok(decoded) = decode_header(part) {
                let _ = decode_body(decoded.api_key, 9, decoded.body);
            }
        }
        assert_eq!(
            decode_header(Bytes::from_static(&[0x7f, 0x7f, 0, 0, 0, 0, 0, 1])).err(),
            Some(FrameError::UnknownApiKey(0x7f7f))
        );
        let mut seed = 1u64;
        for _ in 0..2000 {
            let len = (seed % 64) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    (seed >> 56) as u8
                })
                .collect();
            let mut bytes = bytes;
            if bytes.len() >= 4 {
                bytes[0] = 0;
                bytes[1] = (seed % 20) as u8;
                bytes[2] = 0;
                bytes[3] = (seed % 5) as u8;
            }
            if let Ok(decoded) = decode_header(Bytes::from(bytes)) {
                let version = decoded.header.request_api_version;
                let _ = decode_body(decoded.api_key, version, decoded.body);
            }
        }
    }
}
