//! Share sessions (KIP-932) of this shard's connections: the partitions a share consumer
//! fetches from this broker, and its session epoch, as fetch sessions do for Fetch.
//!
//! A session is keyed by (group, member). Epoch 0 opens one (replacing the member's old one
//! here); each later request must carry the epoch the session expects next
//! (INVALID_SHARE_SESSION_EPOCH), which then advances (after `i32::MAX` it goes to 1); a
//! request for a session that is not here is SHARE_SESSION_NOT_FOUND (the client opens a new
//! one). Epoch -1 closes it. A session belongs to the connection that opened it: when that
//! connection closes, its sessions close too, and the records their members hold on those
//! partitions are released at once rather than at their lock timeout (as Kafka's share
//! session cache does on a client disconnect).
//! Bounds: at most `SHARE_SESSIONS_MAX` sessions per shard (SHARE_SESSION_LIMIT_REACHED) and
//! `SHARE_SESSION_PARTITIONS_MAX` partitions per session (INVALID_REQUEST).
//! Runs on: one shard (borrows never cross an await).
//! References: KIP-932 ("Share sessions"); Kafka `ShareSessionCache`, `ShareFetchMetadata`.

use crate::error::{BrokerError, ShareError};
use indexmap::IndexMap;
use std::collections::HashMap;
use wire::ids::TopicPartition;

/// Kafka's `group.share.max.share.sessions` default (strata's bound is per shard).
pub const SHARE_SESSIONS_MAX: usize = 2_000;
/// The partitions one share session may name.
pub const SHARE_SESSION_PARTITIONS_MAX: usize = 10_000;
/// Epoch 0 opens a session; -1 closes one.
pub const INITIAL_EPOCH: i32 = 0;
pub const FINAL_EPOCH: i32 = -1;

/// (group, member).
pub type SessionKey = (String, String);

/// One member's share session on this shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareSession {
    /// The epoch the next request must carry.
    pub next_epoch: i32,
    /// The partitions it fetches from, with their topic ids, in the order they are served.
    pub partitions: IndexMap<TopicPartition, uuid::Uuid>,
    /// The connection that opened it.
    pub connection_id: u64,
}

fn next(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

#[derive(Debug, Default)]
pub struct ShareSessions {
    sessions: HashMap<SessionKey, ShareSession>,
}

impl ShareSessions {
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Epoch 0: a new session for `key` on `connection_id` (the member's old one here is
    /// replaced). Answers the old session's partitions, whose records the caller releases.
    pub fn open(
        &mut self,
        key: SessionKey,
        connection_id: u64,
        partitions: Vec<(TopicPartition, uuid::Uuid)>,
    ) -> Result<Option<ShareSession>, BrokerError> {
        let old = self.sessions.remove(&key);
        if self.sessions.len() >= SHARE_SESSIONS_MAX {
            return Err(BrokerError::Share(ShareError::SessionLimitReached));
        }
        let partitions: IndexMap<_, _> = partitions.into_iter().collect();
        if partitions.len() > SHARE_SESSION_PARTITIONS_MAX {
            return Err(too_many());
        }
        let session = ShareSession { next_epoch: next(INITIAL_EPOCH), partitions, connection_id };
        self.sessions.insert(key, session);
        Ok(old)
    }

    /// A request of epoch > 0: the session must be here and expect `epoch`; it then expects
    /// the next one, and takes the request's new partitions and drops the forgotten ones.
    pub fn advance(
        &mut self,
        key: &SessionKey,
        epoch: i32,
        added: Vec<(TopicPartition, uuid::Uuid)>,
        forgotten: &[TopicPartition],
    ) -> Result<&ShareSession, BrokerError> {
        let session = self
            .sessions
            .get_mut(key)
            .ok_or_else(|| BrokerError::Share(ShareError::SessionNotFound(key.1.clone())))?;
        if epoch != session.next_epoch {
            return Err(BrokerError::Share(ShareError::InvalidSessionEpoch {
                got: epoch,
                expected: session.next_epoch,
            }));
        }
        for partition in forgotten {
            session.partitions.shift_remove(partition);
        }
        for (partition, topic_id) in added {
            session.partitions.insert(partition, topic_id);
        }
        if session.partitions.len() > SHARE_SESSION_PARTITIONS_MAX {
            self.sessions.remove(key);
            return Err(too_many());
        }
        let Some(session) = self.sessions.get_mut(key) else {
            return Err(BrokerError::Share(ShareError::SessionNotFound(key.1.clone())));
        };
        session.next_epoch = next(session.next_epoch);
        Ok(session)
    }

    /// Epoch -1: the session ends (it must be here).
    pub fn close(&mut self, key: &SessionKey) -> Result<ShareSession, BrokerError> {
        self.sessions
            .remove(key)
            .ok_or_else(|| BrokerError::Share(ShareError::SessionNotFound(key.1.clone())))
    }

    /// Moves the partitions served first to the end, so that under MaxRecords every
    /// partition gets its turn.
    pub fn rotate(&mut self, key: &SessionKey, served: usize) {
        if let Some(session) = self.sessions.get_mut(key) {
            for _ in 0..served.min(session.partitions.len()) {
                if let Some((partition, id)) = session.partitions.shift_remove_index(0) {
                    session.partitions.insert(partition, id);
                }
            }
        }
    }

    /// The connection closed: its sessions end.
    pub fn connection_closed(&mut self, connection_id: u64) -> Vec<(SessionKey, ShareSession)> {
        let keys: Vec<SessionKey> = self
            .sessions
            .iter()
            .filter(|(_, session)| session.connection_id == connection_id)
            .map(|(key, _)| key.clone())
            .collect();
        keys.into_iter()
            .filter_map(|key| self.sessions.remove(&key).map(|session| (key, session)))
            .collect()
    }
}

fn too_many() -> BrokerError {
    BrokerError::InvalidRequest(format!(
        "a share session may name at most {SHARE_SESSION_PARTITIONS_MAX} partitions"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> SessionKey {
        ("g".into(), "m".into())
    }

    #[test]
    fn epochs_advance_one_at_a_time_and_a_closed_session_is_not_found() {
        let mut sessions = ShareSessions::default();
        let tp = TopicPartition::new("t", 0);
        sessions.open(key(), 7, vec![(tp.clone(), uuid::Uuid::nil())]).unwrap();
        assert!(sessions.advance(&key(), 2, vec![], &[]).is_err());
        assert_eq!(sessions.advance(&key(), 1, vec![], &[]).unwrap().next_epoch, 2);
        assert_eq!(sessions.advance(&key(), 2, vec![], &[tp]).unwrap().partitions.len(), 0);
        assert_eq!(sessions.connection_closed(7).len(), 1);
        assert!(matches!(
            sessions.advance(&key(), 3, vec![], &[]),
            Err(BrokerError::Share(ShareError::SessionNotFound(_)))
        ));
    }
}
