//! The share-state router: a share partition's leader reaches the share coordinator of its
//! state, the leader of the `__share_group_state` partition its key hashes to: over the mesh
//! when this node leads that partition, else with Kafka's inter-broker state APIs
//! (Initialize/Read/Write/DeleteShareGroupState v0) on a pooled inter-broker connection.
//! The topic is created on first use (as Kafka's FindCoordinator does for key type 2), with the
//! replication factor of `__consumer_offsets`. A call is retried while the coordinator moves
//! (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a connection that fails) for up to
//! `CALL_DEADLINE`, so a coordinator's failover delays acknowledgements instead of failing them.

use super::{MetadataRouter, Placements};
use crate::error::{BrokerError, GroupError, Result};
use crate::metadata::decide::MetadataChange;
use crate::metadata::internal::SHARE_STATE_TOPIC;
use crate::services::share_state::records::StateKey;
use crate::services::share_state::requests::{DeleteState, ReadState, WriteState};
use crate::services::share_state::{state_partition, ShareStateService};
use crate::services::shares::state::{Persisted, RecordState, StateBatch, Stored};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use shard::io::Storage;
use std::marker::PhantomData;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// How long a state call keeps trying while the coordinator is unavailable.
pub const CALL_DEADLINE: Duration = Duration::from_secs(30);
/// One remote exchange's bound (connect, append with acks=all, answer).
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(20);
const RETRY_BACKOFF: Duration = Duration::from_millis(200);
const ANSWER_BYTES_MAX: usize = 4 << 20;
const IDLE_CONNECTIONS_PER_BROKER: usize = 8;
const CLIENT_ID: &str = "strata-share-partition";
const STATE_API_VERSION: i16 = 0;

/// What a state call does.
enum StateCall {
    Read { leader_epoch: i32 },
    Write { leader_epoch: i32, state_epoch: i32, state: Persisted, initialize: bool },
    Delete,
}

/// A state call's answer.
enum StateAnswer {
    Read(Option<Stored>),
    Done,
}

pub struct ShareStateRouter<S: Storage> {
    placements: Placements,
    metadata: MetadataRouter<S>,
    replication_factor: i32,
    pool: crate::peer::Pool,
    storage: PhantomData<S>,
}

impl<S: Storage> ShareStateRouter<S> {
    pub fn new(
        placements: Placements,
        metadata: MetadataRouter<S>,
        replication_factor: i32,
    ) -> Self {
        ShareStateRouter {
            placements,
            metadata,
            replication_factor,
            pool: crate::peer::Pool::new(CLIENT_ID, IDLE_CONNECTIONS_PER_BROKER),
            storage: PhantomData,
        }
    }

    /// The persisted state of `key` (None: never initialized), read at `leader_epoch` (a
    /// tool's read: negative).
    pub async fn read(&self, key: &StateKey, leader_epoch: i32) -> Result<Option<Stored>> {
        match self.call(key, StateCall::Read { leader_epoch }).await? {
            StateAnswer::Read(state) => Ok(state),
            StateAnswer::Done => Ok(None),
        }
    }

    /// Writes `state` for `key`, whose state is at `state_epoch` (`initialize`: a state that
    /// starts over at `state_epoch`).
    pub async fn write(
        &self,
        key: &StateKey,
        leader_epoch: i32,
        state_epoch: i32,
        state: Persisted,
        initialize: bool,
    ) -> Result<()> {
        let call = StateCall::Write { leader_epoch, state_epoch, state, initialize };
        self.call(key, call).await.map(|_| ())
    }

    pub async fn delete(&self, key: &StateKey) -> Result<()> {
        self.call(key, StateCall::Delete).await.map(|_| ())
    }

    async fn call(&self, key: &StateKey, call: StateCall) -> Result<StateAnswer> {
        let deadline = Instant::now() + CALL_DEADLINE;
        loop {
            let outcome = self.call_once(key, &call).await;
            match outcome {
                Err(error) if retriable(&error) && Instant::now() < deadline => {
                    tracing::debug!(group = %key.0, partition = key.2, %error, "share state call retried");
                    shard::runtime::sleep(RETRY_BACKOFF).await;
                }
                other => return other,
            }
        }
    }

    async fn call_once(&self, key: &StateKey, call: &StateCall) -> Result<StateAnswer> {
        let image = self.placements.image();
        if image.topic(SHARE_STATE_TOPIC).is_none() {
            self.create_topic().await;
            return Err(BrokerError::Group(GroupError::CoordinatorNotAvailable));
        }
        let partition = state_partition(key);
        let placement = image
            .placement(&partition)
            .ok_or(BrokerError::Group(GroupError::CoordinatorNotAvailable))?;
        if placement.leader.0 < 0 {
            return Err(BrokerError::Group(GroupError::CoordinatorNotAvailable));
        }
        if placement.leader == self.placements.node() {
            return self.local(placement.shard, key, call).await;
        }
        self.remote(placement.leader.0, key, call).await
    }

    async fn local(
        &self,
        shard: shard::runtime::ShardId,
        key: &StateKey,
        call: &StateCall,
    ) -> Result<StateAnswer> {
        let mesh = &self.placements.mesh;
        match call {
            StateCall::Read { leader_epoch } => {
                let request = ReadState { key: key.clone(), leader_epoch: *leader_epoch };
                let state = mesh.call::<ShareStateService<S>, _>(shard, request).await??;
                Ok(StateAnswer::Read(state))
            }
            StateCall::Write { leader_epoch, state_epoch, state, initialize } => {
                let request = WriteState {
                    key: key.clone(),
                    leader_epoch: *leader_epoch,
                    state_epoch: *state_epoch,
                    state: state.clone(),
                    initialize: *initialize,
                };
                mesh.call::<ShareStateService<S>, _>(shard, request).await??;
                Ok(StateAnswer::Done)
            }
            StateCall::Delete => {
                let request = DeleteState { key: key.clone() };
                mesh.call::<ShareStateService<S>, _>(shard, request).await??;
                Ok(StateAnswer::Done)
            }
        }
    }

    async fn remote(&self, broker: i32, key: &StateKey, call: &StateCall) -> Result<StateAnswer> {
        let unavailable = |why: String| {
            tracing::debug!(%why, "share coordinator unreachable");
            BrokerError::Group(GroupError::CoordinatorNotAvailable)
        };
        let (host, port) = self
            .placements
            .endpoint(wire::ids::NodeId(broker))
            .ok_or_else(|| unavailable(format!("broker {broker} is not live")))?;
        let (api, request) = request_of(key, call);
        let answer = self
            .pool
            .call(
                (broker, &host, port),
                (api, STATE_API_VERSION),
                request,
                ANSWER_BYTES_MAX,
                EXCHANGE_TIMEOUT,
            )
            .await
            .map_err(|why| unavailable(format!("broker {broker}: {why}")))?;
        answer_of(answer)
    }

    /// Asks the controller for `__share_group_state` (as `__consumer_offsets` is created).
    async fn create_topic(&self) {
        let mut topic = crate::metadata::startup::share_state_topic();
        topic.replication_factor = self.replication_factor;
        for result in self.metadata.change(MetadataChange::CreateTopics(vec![topic])).await {
            match result {
                Ok(()) | Err(BrokerError::TopicAlreadyExists(_)) => {}
                Err(BrokerError::InvalidReplicationFactor(why)) => {
                    tracing::debug!(%why, "{SHARE_STATE_TOPIC} waits for more brokers")
                }
                Err(error) => tracing::warn!(%error, "creating {SHARE_STATE_TOPIC}"),
            }
        }
    }
}

/// Errors worth another try: the coordinator is moving or unreachable.
fn retriable(error: &BrokerError) -> bool {
    matches!(
        error,
        BrokerError::Group(GroupError::NotCoordinator | GroupError::CoordinatorNotAvailable)
            | BrokerError::NotLeader(_)
            | BrokerError::LeaderNotAvailable(_)
            | BrokerError::Mesh(_)
    )
}

fn topic_id(key: &StateKey) -> uuid::Uuid {
    uuid::Uuid::from_bytes(key.1)
}

fn request_of(key: &StateKey, call: &StateCall) -> (ApiKey, RequestKind) {
    let group = StrBytes::from_string(key.0.clone());
    match call {
        StateCall::Read { leader_epoch } => {
            let mut partition = read_share_group_state_request::PartitionData::default();
            partition.partition = key.2;
            partition.leader_epoch = *leader_epoch;
            let mut topic = read_share_group_state_request::ReadStateData::default();
            topic.topic_id = topic_id(key);
            topic.partitions = vec![partition];
            let mut request = ReadShareGroupStateRequest::default();
            request.group_id = group;
            request.topics = vec![topic];
            (ApiKey::ReadShareGroupState, RequestKind::ReadShareGroupState(request))
        }
        StateCall::Write { state, state_epoch, initialize: true, .. } => {
            let mut partition = initialize_share_group_state_request::PartitionData::default();
            partition.partition = key.2;
            partition.state_epoch = *state_epoch;
            partition.start_offset = state.start_offset;
            let mut topic = initialize_share_group_state_request::InitializeStateData::default();
            topic.topic_id = topic_id(key);
            topic.partitions = vec![partition];
            let mut request = InitializeShareGroupStateRequest::default();
            request.group_id = group;
            request.topics = vec![topic];
            (ApiKey::InitializeShareGroupState, RequestKind::InitializeShareGroupState(request))
        }
        StateCall::Write { leader_epoch, state_epoch, state, initialize: false } => {
            let mut partition = write_share_group_state_request::PartitionData::default();
            partition.partition = key.2;
            partition.leader_epoch = *leader_epoch;
            partition.state_epoch = *state_epoch;
            partition.start_offset = state.start_offset;
            partition.state_batches = state
                .batches
                .iter()
                .map(|batch| {
                    let mut out = write_share_group_state_request::StateBatch::default();
                    out.first_offset = batch.first_offset;
                    out.last_offset = batch.last_offset;
                    out.delivery_state = batch.state.id();
                    out.delivery_count = batch.delivery_count;
                    out
                })
                .collect();
            let mut topic = write_share_group_state_request::WriteStateData::default();
            topic.topic_id = topic_id(key);
            topic.partitions = vec![partition];
            let mut request = WriteShareGroupStateRequest::default();
            request.group_id = group;
            request.topics = vec![topic];
            (ApiKey::WriteShareGroupState, RequestKind::WriteShareGroupState(request))
        }
        StateCall::Delete => {
            let mut partition = delete_share_group_state_request::PartitionData::default();
            partition.partition = key.2;
            let mut topic = delete_share_group_state_request::DeleteStateData::default();
            topic.topic_id = topic_id(key);
            topic.partitions = vec![partition];
            let mut request = DeleteShareGroupStateRequest::default();
            request.group_id = group;
            request.topics = vec![topic];
            (ApiKey::DeleteShareGroupState, RequestKind::DeleteShareGroupState(request))
        }
    }
}

/// The error a partition result's code stands for (`None` for success).
fn error_of(code: i16, message: Option<&StrBytes>) -> Option<BrokerError> {
    if code == crate::error::NONE {
        return None;
    }
    let message = message.map(|m| m.to_string()).unwrap_or_default();
    let error = crate::error::answered::share_state_error(code, message);
    Some(error)
}

fn answer_of(answer: ResponseKind) -> Result<StateAnswer> {
    let malformed = || BrokerError::Group(GroupError::CoordinatorNotAvailable);
    match answer {
        ResponseKind::ReadShareGroupState(response) => {
            let result = response
                .results
                .into_iter()
                .flat_map(|t| t.partitions)
                .next()
                .ok_or_else(malformed)?;
            if let Some(error) = error_of(result.error_code, result.error_message.as_ref()) {
                return Err(error);
            }
            // strata's coordinator answers a state never initialized with state epoch -1.
            if result.state_epoch < 0 {
                return Ok(StateAnswer::Read(None));
            }
            let batches = result
                .state_batches
                .into_iter()
                .filter_map(|batch| {
                    Some(StateBatch {
                        first_offset: batch.first_offset,
                        last_offset: batch.last_offset,
                        state: state_of_id(batch.delivery_state)?,
                        delivery_count: batch.delivery_count,
                    })
                })
                .collect();
            let state = Persisted { start_offset: result.start_offset, batches };
            let stored = Stored { state, state_epoch: result.state_epoch, leader_epoch: -1 };
            Ok(StateAnswer::Read(Some(stored)))
        }
        ResponseKind::WriteShareGroupState(response) => {
            let result = response.results.into_iter().flat_map(|t| t.partitions).next();
            let result = result.ok_or_else(malformed)?;
            error_of(result.error_code, result.error_message.as_ref())
                .map_or(Ok(StateAnswer::Done), Err)
        }
        ResponseKind::InitializeShareGroupState(response) => {
            let result = response.results.into_iter().flat_map(|t| t.partitions).next();
            let result = result.ok_or_else(malformed)?;
            error_of(result.error_code, result.error_message.as_ref())
                .map_or(Ok(StateAnswer::Done), Err)
        }
        ResponseKind::DeleteShareGroupState(response) => {
            let result = response.results.into_iter().flat_map(|t| t.partitions).next();
            let result = result.ok_or_else(malformed)?;
            error_of(result.error_code, result.error_message.as_ref())
                .map_or(Ok(StateAnswer::Done), Err)
        }
        _ => Err(malformed()),
    }
}

/// A persisted delivery state id (0 available, 2 acknowledged, 4 archived).
pub fn state_of_id(id: i8) -> Option<RecordState> {
    match id {
        0 => Some(RecordState::Available),
        2 => Some(RecordState::Acknowledged),
        4 => Some(RecordState::Archived),
        _ => None,
    }
}

impl<S: Storage> crate::services::shares::StateStore for Rc<ShareStateRouter<S>> {
    fn read(
        &self,
        key: StateKey,
        leader_epoch: i32,
    ) -> futures_util::future::LocalBoxFuture<'static, Result<Option<Stored>>> {
        let router = self.clone();
        Box::pin(async move { ShareStateRouter::read(&router, &key, leader_epoch).await })
    }

    fn write(
        &self,
        key: StateKey,
        leader_epoch: i32,
        state_epoch: i32,
        state: Persisted,
        initialize: bool,
    ) -> futures_util::future::LocalBoxFuture<'static, Result<()>> {
        let router = self.clone();
        Box::pin(async move {
            ShareStateRouter::write(&router, &key, leader_epoch, state_epoch, state, initialize)
                .await
        })
    }
}
