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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "StoredProposal", into = "StoredProposal")]
pub struct Proposal {
    pub records: Vec<MetadataRecord>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredProposal {
    records: StoredRecords,
}

impl From<StoredProposal> for Proposal {
    fn from(stored: StoredProposal) -> Self {
        Proposal { records: stored.records.into() }
    }
}

impl From<Proposal> for StoredProposal {
    fn from(proposal: Proposal) -> Self {
        StoredProposal { records: proposal.records.into() }
    }
}

/// What applying one entry did: the image version after it, or why its records were refused
/// (the same on every node: apply is deterministic, so a refused entry is refused everywhere
/// and the image is left as it was).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    pub version: u64,
    pub refused: Option<String>,
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
