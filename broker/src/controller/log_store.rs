//! openraft's `RaftLogStorage` over `log_file`: the controller's Raft log and its vote, under
//! `<data_dir>/__cluster_metadata/` (ARCHITECTURE.md, "Cluster control plane").
//!
//! Files: `raft.log` (`log_file` frames, frame `i` = the `i`-th entry kept, as serde_json of
//! openraft's `Entry`) and `raft-state.json` (`{"vote", "committed", "last_purged"}`, replaced
//! whole by `durable_file`).
//! Durability rule: `save_vote` and `save_committed` return once the state file is renamed and
//! its directory synced; `append` reports its entries flushed (openraft's callback) only after
//! `log_file` synced them, so a vote or an entry this node acknowledged survives kill -9.
//! `purge` records the new `last_purged` first, then rewrites the log without the purged
//! entries: a crash between the two leaves entries already purged, skipped at the next open.
//! Invariant: the entries kept are contiguous and follow `last_purged`; a log that breaks this
//! (or an entry that does not decode) is refused at open, never repaired by guessing.
//! Runs on: the controller thread (blocking `std::fs`; the thread has nothing else to stall).

use super::log_file::LogFile;
use super::types::{Entry, LogId, StorageError, Strata, Vote};
use openraft::storage::{LogFlushed, LogState, RaftLogReader, RaftLogStorage};
use openraft::{ErrorSubject, ErrorVerb, RaftLogId, StorageIOError};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

pub const LOG_FILE: &str = "raft.log";
pub const STATE_FILE: &str = "raft-state.json";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RaftState {
    vote: Option<Vote>,
    committed: Option<LogId>,
    last_purged: Option<LogId>,
}

struct Inner {
    state_path: PathBuf,
    state: RaftState,
    file: LogFile,
    /// The entries kept, in log order; `entries[i]` is frame `i` of `file`.
    entries: VecDeque<Entry>,
}

/// The log store; cheap to clone (the clones are its log readers).
#[derive(Clone)]
pub struct LogStore {
    inner: Arc<Mutex<Inner>>,
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

impl LogStore {
    /// Opens (creating) the log in `dir`, recovering it (`log_file`'s torn-tail rule) and
    /// checking that its entries are contiguous after the last purged one.
    pub fn open(dir: &Path) -> io::Result<LogStore> {
        std::fs::create_dir_all(dir)?;
        let state_path = dir.join(STATE_FILE);
        let state: RaftState = match crate::durable_file::read(&state_path)? {
            Some(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| invalid(format!("{}: {e}", state_path.display())))?,
            None => RaftState::default(),
        };
        let log_path = dir.join(LOG_FILE);
        let (mut file, recovered) = LogFile::open(&log_path)?;
        if recovered.truncated_bytes > 0 {
            tracing::warn!(
                bytes = recovered.truncated_bytes,
                path = %log_path.display(),
                "cut a torn tail from the controller log (entries never acknowledged)"
            );
        }
        let mut entries = VecDeque::with_capacity(recovered.payloads.len());
        for (frame, payload) in recovered.payloads.iter().enumerate() {
            let entry: Entry = serde_json::from_slice(payload).map_err(|e| {
                invalid(format!("{}: entry {frame} does not decode: {e}", log_path.display()))
            })?;
            entries.push_back(entry);
        }
        let purged_index = state.last_purged.map(|id| id.index);
        let stale = entries
            .iter()
            .take_while(|entry| purged_index.is_some_and(|purged| entry.log_id.index <= purged))
            .count();
        if stale > 0 {
            // A crash after `purge` recorded its id and before the log was rewritten.
            file.drop_front(stale)?;
            entries.drain(..stale);
        }
        let mut expected = purged_index.map(|purged| purged + 1);
        for entry in &entries {
            if expected.is_some_and(|index| entry.log_id.index != index) {
                return Err(invalid(format!(
                    "{}: entry {} follows {} (the log has a hole); refusing to use it",
                    log_path.display(),
                    entry.log_id.index,
                    expected.map_or(0, |index| index - 1),
                )));
            }
            expected = Some(entry.log_id.index + 1);
        }
        let inner = Inner { state_path, state, file, entries };
        Ok(LogStore { inner: Arc::new(Mutex::new(inner)) })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves the in-memory copy possibly ahead of the file;
        // the thread is going down anyway, and the next open recovers from the files.
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Inner {
    fn write_state(&mut self, next: RaftState) -> io::Result<()> {
        let bytes = serde_json::to_vec(&next).map_err(io::Error::other)?;
        crate::durable_file::write(&self.state_path, &bytes)?;
        self.state = next;
        Ok(())
    }

    fn last_log_id(&self) -> Option<LogId> {
        self.entries.back().map(|entry| *entry.get_log_id()).or(self.state.last_purged)
    }

    /// How many kept entries have an index below `index`.
    fn count_below(&self, index: u64) -> usize {
        self.entries.iter().take_while(|entry| entry.log_id.index < index).count()
    }
}

fn log_error(verb: ErrorVerb, error: io::Error) -> StorageError {
    StorageIOError::new(ErrorSubject::Logs, verb, &error).into()
}

fn vote_error(verb: ErrorVerb, error: io::Error) -> StorageError {
    StorageIOError::new(ErrorSubject::Vote, verb, &error).into()
}

impl RaftLogReader<Strata> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let inner = self.lock();
        let start = match range.start_bound() {
            Bound::Included(&index) => index,
            Bound::Excluded(&index) => index.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let skip = inner.count_below(start);
        Ok(inner
            .entries
            .iter()
            .skip(skip)
            .take_while(|entry| range.contains(&entry.log_id.index))
            .cloned()
            .collect())
    }
}

impl RaftLogStorage<Strata> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<Strata>, StorageError> {
        let inner = self.lock();
        Ok(LogState {
            last_purged_log_id: inner.state.last_purged,
            last_log_id: inner.last_log_id(),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let mut inner = self.lock();
        let next = RaftState { vote: Some(*vote), ..inner.state.clone() };
        inner.write_state(next).map_err(|e| vote_error(ErrorVerb::Write, e))
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        Ok(self.lock().state.vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        let mut inner = self.lock();
        if inner.state.committed == committed {
            return Ok(());
        }
        let next = RaftState { committed, ..inner.state.clone() };
        inner.write_state(next).map_err(|e| log_error(ErrorVerb::Write, e))
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self.lock().state.committed)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<Strata>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        let mut payloads = Vec::with_capacity(entries.len());
        for entry in &entries {
            payloads.push(
                serde_json::to_vec(entry)
                    .map_err(|e| log_error(ErrorVerb::Write, io::Error::other(e)))?,
            );
        }
        let mut inner = self.lock();
        let written = inner.file.append(&payloads);
        match written {
            Ok(()) => {
                inner.entries.extend(entries);
                drop(inner);
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(error) => {
                let message = error.to_string();
                drop(inner);
                callback.log_io_completed(Err(io::Error::other(message)));
                Err(log_error(ErrorVerb::Write, error))
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let mut inner = self.lock();
        let keep = inner.count_below(log_id.index);
        inner.file.truncate(keep).map_err(|e| log_error(ErrorVerb::Delete, e))?;
        inner.entries.truncate(keep);
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let mut inner = self.lock();
        if inner.state.last_purged.is_some_and(|purged| purged.index >= log_id.index) {
            return Ok(());
        }
        let next = RaftState { last_purged: Some(log_id), ..inner.state.clone() };
        inner.write_state(next).map_err(|e| log_error(ErrorVerb::Delete, e))?;
        let drop = inner.count_below(log_id.index + 1);
        inner.file.drop_front(drop).map_err(|e| log_error(ErrorVerb::Delete, e))?;
        inner.entries.drain(..drop);
        Ok(())
    }
}
