//! ApiVersions (key 18): the APIs and version ranges strata serves, taken from the handlers.
//! A request with a version beyond ours is answered in v0 with UNSUPPORTED_VERSION and our
//! ranges (see `connection`), as KIP-511 specifies.

use super::SUPPORTED;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};

pub const VERSIONS: (i16, i16) = (0, 3);

pub fn handle(_version: i16, _request: ApiVersionsRequest) -> ApiVersionsResponse {
    response(crate::error::code::NONE)
}

/// The ApiVersions answer with `error_code`.
pub fn response(error_code: i16) -> ApiVersionsResponse {
    let mut response = ApiVersionsResponse::default();
    response.error_code = error_code;
    response.api_keys = SUPPORTED
        .iter()
        .map(|&(key, min, max)| {
            let mut entry = ApiVersion::default();
            entry.api_key = key as i16;
            entry.min_version = min;
            entry.max_version = max;
            entry
        })
        .collect();
    response
}
