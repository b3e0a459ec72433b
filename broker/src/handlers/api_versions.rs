//! ApiVersions (key 18): the APIs and version ranges strata serves, as the registry
//! (`crate::api::advertised`) hands them in, and from v3 the features (KIP-584): `metadata.version`, supported
//! and finalized, with the metadata image's version as the finalized-features epoch. Java
//! clients 4.x read the finalized features (a missing `transaction.version` means the
//! transaction protocol before KIP-890, which is what strata will speak first).
//! A request with a version beyond ours is answered in v0 with UNSUPPORTED_VERSION and our
//! ranges (see `connection`), as KIP-511 specifies.

use crate::error::NONE;
use crate::node::Node;
use crate::request_context::RequestContext;
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use shard::io::Storage;

pub const VERSIONS: (i16, i16) = (0, 3);

/// `metadata.version` strata reports: 7 is 3.3-IV3, the oldest level Kafka 4.0 accepts; strata
/// implements none of the newer levels' metadata records yet.
pub const METADATA_VERSION_LEVEL: i16 = 7;

pub async fn handle<S: Storage>(
    node: &Node<S>,
    context: &RequestContext,
    _request: ApiVersionsRequest,
    supported: &[(ApiKey, i16, i16)],
) -> ApiVersionsResponse {
    let mut response = response(NONE, supported);
    if context.api_version >= 3 {
        let name = super::str_bytes("metadata.version");
        let mut supported = SupportedFeatureKey::default();
        supported.name = name.clone();
        supported.min_version = METADATA_VERSION_LEVEL;
        supported.max_version = METADATA_VERSION_LEVEL;
        response.supported_features = vec![supported];
        let mut finalized = FinalizedFeatureKey::default();
        finalized.name = name;
        finalized.min_version_level = METADATA_VERSION_LEVEL;
        finalized.max_version_level = METADATA_VERSION_LEVEL;
        response.finalized_features = vec![finalized];
        response.finalized_features_epoch =
            i64::try_from(node.metadata().version).unwrap_or(i64::MAX);
    }
    response
}

/// The ApiVersions answer with `error_code` and the APIs `supported`.
pub fn response(error_code: i16, supported: &[(ApiKey, i16, i16)]) -> ApiVersionsResponse {
    let mut response = ApiVersionsResponse::default();
    response.error_code = error_code;
    response.api_keys = supported
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
