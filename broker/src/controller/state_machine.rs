//! openraft's `RaftStateMachine`: the metadata image, built from committed entries by the one
//! pure `metadata::apply_all` single-node strata uses, and its snapshots.
//!
//! Files: `snapshot.json` under `<data_dir>/__cluster_metadata/` (`{"meta": openraft's
//! SnapshotMeta, "data": the snapshot's bytes as a string}`, the data being
//! `{"image": <strata-metadata.json's format>}`), replaced whole by `durable_file`.
//! Durability rule: the image itself is not persisted on each apply; the log holds it, and at
//! open the image is the last snapshot's, after which openraft applies the committed entries
//! again (it reads the committed id `log_store` saved). A snapshot is reported built or
//! installed only once its file is synced.
//! Invariant: an entry applies whole or not at all: records that fail to apply leave the image
//! unchanged, identically on every node (the function is deterministic), and the proposer is
//! told why (`Applied::refused`).
//! Runs on: the controller thread; `ImageCell` is read from shard 0.

use super::types::StoredMembership;
use super::types::{Applied, Entry, LogId, Refused, Snapshot, SnapshotMeta, StorageError, Strata};
use crate::metadata::{apply_all, store, MetadataImage, PlacementPolicy};
use openraft::storage::{RaftSnapshotBuilder, RaftStateMachine};
use openraft::{EntryPayload, ErrorSubject, ErrorVerb, StorageIOError};
use serde::{Deserialize, Serialize};
use std::io::{self, Cursor};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use wire::ids::NodeId as KafkaNodeId;

pub const SNAPSHOT_FILE: &str = "snapshot.json";

/// The newest applied image, for the broker side to take (shard 0 waits on it). Holds the
/// latest only: a reader that falls behind skips to the newest image, which is what it would
/// end at anyway.
#[derive(Default)]
pub struct ImageCell {
    latest: Mutex<(Arc<MetadataImage>, Option<LogId>)>,
    changed: event_listener::Event,
}

impl ImageCell {
    pub fn latest(&self) -> (Arc<MetadataImage>, Option<LogId>) {
        self.lock().clone()
    }

    /// Waits until an entry after `seen` is applied, then returns the newest image.
    pub async fn next_after(&self, seen: Option<u64>) -> (Arc<MetadataImage>, Option<LogId>) {
        loop {
            let listener = self.changed.listen();
            let latest = self.latest();
            if latest.1.map(|id| id.index) > seen {
                return latest;
            }
            listener.await;
        }
    }

    fn set(&self, image: Arc<MetadataImage>, applied: Option<LogId>) {
        *self.lock() = (image, applied);
        self.changed.notify(usize::MAX);
    }

    fn lock(&self) -> MutexGuard<'_, (Arc<MetadataImage>, Option<LogId>)> {
        self.latest.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredSnapshot {
    meta: SnapshotMeta,
    data: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SnapshotBody {
    image: serde_json::Value,
}

struct Inner {
    snapshot_path: PathBuf,
    image: Arc<MetadataImage>,
    last_applied: Option<LogId>,
    membership: StoredMembership,
    /// The last snapshot built or installed, as written to its file.
    snapshot: Option<(SnapshotMeta, Vec<u8>)>,
    /// Snapshots built by this node, to name them uniquely.
    built: u64,
}

/// The state machine; its clones are its snapshot builders.
#[derive(Clone)]
pub struct StateMachine {
    inner: Arc<Mutex<Inner>>,
    cell: Arc<ImageCell>,
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

/// The image a snapshot's data holds.
fn image_of(data: &[u8]) -> io::Result<MetadataImage> {
    let body: SnapshotBody = serde_json::from_slice(data)
        .map_err(|e| invalid(format!("a snapshot does not decode: {e}")))?;
    let bytes = serde_json::to_vec(&body.image).map_err(io::Error::other)?;
    // Images in snapshots are format 2: placement is stored, so the policy is never used.
    let unused = PlacementPolicy { node: KafkaNodeId(0), shard_count: 1 };
    let (image, _) =
        store::load(&bytes, unused).map_err(|e| invalid(format!("a snapshot's image: {e}")))?;
    Ok(image)
}

fn data_of(image: &MetadataImage) -> io::Result<Vec<u8>> {
    let image: serde_json::Value =
        serde_json::from_slice(&store::to_json(image)).map_err(io::Error::other)?;
    serde_json::to_vec(&SnapshotBody { image }).map_err(io::Error::other)
}

fn snapshot_error(error: io::Error) -> StorageError {
    StorageIOError::new(ErrorSubject::Snapshot(None), ErrorVerb::Write, &error).into()
}

impl StateMachine {
    /// Opens the state machine in `dir`: the last snapshot's image, or an empty one.
    pub fn open(dir: &Path, cell: Arc<ImageCell>) -> io::Result<StateMachine> {
        std::fs::create_dir_all(dir)?;
        let snapshot_path = dir.join(SNAPSHOT_FILE);
        let mut inner = Inner {
            snapshot_path,
            image: Arc::new(MetadataImage::default()),
            last_applied: None,
            membership: StoredMembership::default(),
            snapshot: None,
            built: 0,
        };
        if let Some(bytes) = crate::durable_file::read(&inner.snapshot_path)? {
            let stored: StoredSnapshot = serde_json::from_slice(&bytes)
                .map_err(|e| invalid(format!("{}: {e}", inner.snapshot_path.display())))?;
            let data = stored.data.into_bytes();
            inner.image = Arc::new(image_of(&data)?);
            inner.last_applied = stored.meta.last_log_id;
            inner.membership = stored.meta.last_membership.clone();
            inner.snapshot = Some((stored.meta, data));
        }
        cell.set(inner.image.clone(), inner.last_applied);
        Ok(StateMachine { inner: Arc::new(Mutex::new(inner)), cell })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Inner {
    fn keep_snapshot(&mut self, meta: SnapshotMeta, data: Vec<u8>) -> io::Result<()> {
        let text = String::from_utf8(data).map_err(|e| invalid(e.to_string()))?;
        let stored = StoredSnapshot { meta: meta.clone(), data: text };
        let bytes = serde_json::to_vec(&stored).map_err(io::Error::other)?;
        crate::durable_file::write(&self.snapshot_path, &bytes)?;
        self.snapshot = Some((meta, stored.data.into_bytes()));
        Ok(())
    }
}

impl RaftSnapshotBuilder<Strata> for StateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot, StorageError> {
        let mut inner = self.lock();
        let data = data_of(&inner.image).map_err(snapshot_error)?;
        inner.built += 1;
        let snapshot_id = match inner.last_applied {
            Some(id) => format!("{}-{}-{}", id.leader_id, id.index, inner.built),
            None => format!("none-{}", inner.built),
        };
        let meta = SnapshotMeta {
            last_log_id: inner.last_applied,
            last_membership: inner.membership.clone(),
            snapshot_id,
        };
        inner.keep_snapshot(meta.clone(), data.clone()).map_err(snapshot_error)?;
        Ok(Snapshot { meta, snapshot: Box::new(Cursor::new(data)) })
    }
}

impl RaftStateMachine<Strata> for StateMachine {
    type SnapshotBuilder = StateMachine;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        let inner = self.lock();
        Ok((inner.last_applied, inner.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Applied>, StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let mut inner = self.lock();
        let mut answers = Vec::new();
        for entry in entries {
            inner.last_applied = Some(entry.log_id);
            let mut refused = None;
            match entry.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(proposal) => {
                    let actual = inner.image.version;
                    match proposal.expected_version {
                        Some(expected) if expected != actual => {
                            refused = Some(Refused::Stale { expected, actual });
                        }
                        _ => match apply_all(&inner.image, &proposal.records) {
                            Ok(next) => inner.image = Arc::new(next),
                            Err(error) => refused = Some(Refused::Invalid(error.to_string())),
                        },
                    }
                }
                EntryPayload::Membership(membership) => {
                    inner.membership = StoredMembership::new(Some(entry.log_id), membership);
                }
            }
            answers.push(Applied { version: inner.image.version, refused });
        }
        self.cell.set(inner.image.clone(), inner.last_applied);
        Ok(answers)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let data = snapshot.into_inner();
        let image = image_of(&data).map_err(snapshot_error)?;
        let mut inner = self.lock();
        inner.keep_snapshot(meta.clone(), data).map_err(snapshot_error)?;
        inner.image = Arc::new(image);
        inner.last_applied = meta.last_log_id;
        inner.membership = meta.last_membership.clone();
        self.cell.set(inner.image.clone(), inner.last_applied);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, StorageError> {
        let inner = self.lock();
        Ok(inner.snapshot.as_ref().map(|(meta, data)| Snapshot {
            meta: meta.clone(),
            snapshot: Box::new(Cursor::new(data.clone())),
        }))
    }
}
