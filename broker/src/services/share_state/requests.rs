//! The share coordinator's requests, each with the type of its answer (`mesh::Ask`), and how
//! the service answers them (`mesh::Answers`).

use super::records::StateKey;
use super::ShareStateService;
use crate::error::Result;
use crate::mesh::{answers, Ask};
use crate::services::shares::state::{Persisted, Stored};

/// ReadShareGroupState: the state, or none before it is initialized.
pub struct ReadState {
    pub key: StateKey,
    pub leader_epoch: i32,
}

impl Ask for ReadState {
    type Answer = Result<Option<Stored>>;
}

answers!(ShareStateService, ReadState, |service, read| {
    service.read(read.key, read.leader_epoch).await
});

/// InitializeShareGroupState (`initialize`) and WriteShareGroupState.
pub struct WriteState {
    pub key: StateKey,
    pub leader_epoch: i32,
    pub state_epoch: i32,
    pub state: Persisted,
    pub initialize: bool,
}

impl Ask for WriteState {
    type Answer = Result<()>;
}

answers!(ShareStateService, WriteState, |service, write| {
    service
        .write(write.key, write.leader_epoch, write.state_epoch, write.state, write.initialize)
        .await
});

/// DeleteShareGroupState.
pub struct DeleteState {
    pub key: StateKey,
}

impl Ask for DeleteState {
    type Answer = Result<()>;
}

answers!(ShareStateService, DeleteState, |service, delete| service.delete(delete.key).await);
