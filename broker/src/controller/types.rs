//! The controller's openraft type configuration: what one Raft entry carries (`Proposal`, an
//! atomic list of metadata records) and what applying it answers (`Applied`).
//!
//! Runs on: the controller thread.

use crate::metadata::record_codec::StoredRecords;
use crate::metadata::MetadataRecord;
use serde::{Deserialize, Serialize};
use std::io::Cursor;

/// One Raft entry's payload: records applied together or not at all, so a crash leaves a
/// change whole or absent (a topic with all its partitions, or none).
///
/// `expected_version` makes a decision conditional: a broker decides against its image at
/// version V (`metadata::decide`, pure) and proposes the records with V; if another change
/// was applied first, the entry is refused as stale (identically on every node) and the broker
/// decides again on the newer image. So decisions never need a lock across brokers, and what
/// the log carries is always a decision made on the image it applies to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "StoredProposal", into = "StoredProposal")]
pub struct Proposal {
    pub expected_version: Option<u64>,
    pub records: Vec<MetadataRecord>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredProposal {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expected_version: Option<u64>,
    records: StoredRecords,
}

impl From<StoredProposal> for Proposal {
    fn from(stored: StoredProposal) -> Self {
        Proposal { expected_version: stored.expected_version, records: stored.records.into() }
    }
}

impl From<Proposal> for StoredProposal {
    fn from(proposal: Proposal) -> Self {
        StoredProposal {
            expected_version: proposal.expected_version,
            records: proposal.records.into(),
        }
    }
}

/// What applying one entry did: the image version after it, or why its records were refused
/// (the same on every node: apply is deterministic, so a refused entry is refused everywhere
/// and the image is left as it was).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    pub version: u64,
    pub refused: Option<Refused>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Refused {
    /// The image moved on since the proposer decided (`Proposal::expected_version`).
    Stale { expected: u64, actual: u64 },
    /// The records do not apply to the image (a bug in a decision, reported, never skipped
    /// silently on one node only).
    Invalid(String),
}

openraft::declare_raft_types!(
    /// strata's controller quorum.
    pub Strata:
        D = Proposal,
        R = Applied,
        NodeId = u64,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<Strata>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

pub type NodeId = u64;
pub type LogId = openraft::LogId<NodeId>;
pub type Vote = openraft::Vote<NodeId>;
pub type Entry = openraft::Entry<Strata>;
pub type StorageError = openraft::StorageError<NodeId>;
pub type StoredMembership = openraft::StoredMembership<NodeId, openraft::BasicNode>;
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, openraft::BasicNode>;
pub type Snapshot = openraft::Snapshot<Strata>;
pub type Raft = openraft::Raft<Strata>;
