//! openraft's own storage test suite (`openraft::testing::Suite`) run against `log_store` and
//! `state_machine` on real files, plus recovery across a reopen.

use super::log_store::LogStore;
use super::state_machine::{ImageCell, StateMachine};
use super::types::{StorageError, Strata};
use openraft::testing::{StoreBuilder, Suite};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Removes a test's directory when the test ends.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct Builder {
    next: AtomicU64,
}

impl StoreBuilder<Strata, LogStore, StateMachine, TempDir> for Builder {
    async fn build(&self) -> Result<(TempDir, LogStore, StateMachine), StorageError> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("strata-raft-suite-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let log = LogStore::open(&dir).expect("log store opens");
        let machine =
            StateMachine::open(&dir, Arc::new(ImageCell::default())).expect("state machine opens");
        Ok((TempDir(dir), log, machine))
    }
}

#[test]
fn openraft_storage_suite_passes() {
    Suite::test_all(Builder { next: AtomicU64::new(0) }).expect("openraft's storage suite");
}

fn entry(term: u64, index: u64, topic: &str) -> super::types::Entry {
    use crate::metadata::MetadataRecord;
    let records = vec![MetadataRecord::Topic { name: topic.into(), topic_id: [index as u8; 16] }];
    openraft::Entry {
        log_id: openraft::LogId::new(openraft::CommittedLeaderId::new(term, 1), index),
        payload: openraft::EntryPayload::Normal(super::types::Proposal {
            expected_version: None,
            records,
        }),
    }
}

/// What a restarted controller finds: the vote, the committed id and the entries it synced,
/// with a torn last frame cut, and nothing of what it purged.
#[test]
fn a_reopened_log_has_its_vote_committed_id_and_entries_and_nothing_purged() {
    use openraft::storage::{RaftLogReader, RaftLogStorage, RaftLogStorageExt};
    let dir = std::env::temp_dir().join(format!("strata-raft-reopen-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let _guard = TempDir(dir.clone());
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    runtime.block_on(async {
        let mut log = LogStore::open(&dir).expect("open");
        let vote = openraft::Vote::new(3, 1);
        log.save_vote(&vote).await.expect("vote");
        log.blocking_append((1..=5).map(|i| entry(3, i, &format!("t{i}")))).await.expect("append");
        let committed = Some(openraft::LogId::new(openraft::CommittedLeaderId::new(3, 1), 4));
        log.save_committed(committed).await.expect("committed");
        log.purge(openraft::LogId::new(openraft::CommittedLeaderId::new(3, 1), 2))
            .await
            .expect("purge");
        drop(log);
        // A crash in the middle of appending entry 6: half its frame reached the disk.
        let path = dir.join(super::log_store::LOG_FILE);
        let whole = std::fs::metadata(&path).expect("log").len();
        let mut log = LogStore::open(&dir).expect("reopen");
        log.blocking_append([entry(3, 6, "t6")]).await.expect("append 6");
        drop(log);
        let torn = std::fs::metadata(&path).expect("log").len();
        let file = std::fs::OpenOptions::new().write(true).open(&path).expect("open log");
        file.set_len(whole + (torn - whole) / 2).expect("tear");
        drop(file);

        let mut log = LogStore::open(&dir).expect("reopen after the tear");
        assert_eq!(log.read_vote().await.expect("vote"), Some(vote));
        assert_eq!(log.read_committed().await.expect("committed"), committed);
        let state = log.get_log_state().await.expect("state");
        assert_eq!(state.last_purged_log_id.map(|id| id.index), Some(2));
        assert_eq!(state.last_log_id.map(|id| id.index), Some(5), "entry 6 was torn");
        let kept = log.try_get_log_entries(0..100).await.expect("entries");
        let indexes: Vec<u64> = kept.iter().map(|e| e.log_id.index).collect();
        assert_eq!(indexes, vec![3, 4, 5]);
        assert_eq!(kept[0], entry(3, 3, "t3"));
    });
}
