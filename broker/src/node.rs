//! `Node`: this broker as one shard sees it, the context every handler receives.
//!
//! Owns: the shard's services (built and registered on the mesh at startup), its metadata view,
//! its counters and clock, and routing: a partition's owner comes from its placement in the
//! metadata image, a group's coordinator from the placement of its `__consumer_offsets`
//! partition, producer ids and metadata changes from shard 0. Handlers reach services only
//! through the typed calls here, never through a service's state.
//! Generic over the storage, so the same node runs on real files (`DmaStorage`) in the binary
//! and on the simulated disk (`SimStorage`) in in-process tests (`crate::in_process`).
//! Runs on: one shard (`Rc`).

use crate::authorization::{AclOperation, Resource};
use crate::clock::Clock;
use crate::config::BrokerConfig;
use crate::controller::quorum::ControllerHandle;
use crate::error::{error_code, TxnError, VerifyError};
use crate::error::{BrokerError, GroupError, Result};
use crate::mesh::{Answers, Ask, Mesh, MeshReceivers};
use crate::metadata::decide::MetadataChange;
use crate::metadata::internal::{
    partition_for_group, partition_for_transactional_id, OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC,
};
use crate::metadata::{MetadataImage, PlacementPolicy};
use crate::request_context::RequestContext;
use crate::services::fetch_sessions::{
    FetchSessions, SharedFetchSessions, SESSION_PARTITIONS_MAX, SESSION_SLOTS,
};
use crate::services::groups::{requests::TxnMarker, GroupConfig, GroupService};
use crate::services::metadata::{MetadataService, MetadataView, METADATA_SHARD};
use crate::services::partitions::txn_markers::MarkerSpec;
use crate::services::partitions::txn_verify::TxnVerifier;
use crate::services::partitions::waits::{PartitionWaits, WaitForAppend};
use crate::services::partitions::{requests, PartitionService, PartitionServiceParts};
use crate::services::producer_ids::{InitProducerId, ProducerIdService};
use crate::services::replication::ReplicaFetchers;
use crate::services::stats::{Report, StatsReport, StatsService};
use crate::services::transactions::{
    requests::Verify, MarkerFailure, MarkerWriter, TransactionService, TxnConfig,
};
use crate::stats::ShardStats;
use shard::io::Storage;
use shard::runtime::ShardId;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
use wire::ids::{NodeId, Offset, TopicPartition};

/// How often the maintenance task runs interval flushes (retention runs on its own interval).
pub const MAINTENANCE_INTERVAL_MS: u64 = 1000;

/// Where clients reach a broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerEndpoint {
    pub node: NodeId,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
}

/// What a node is built from.
pub struct NodeParts<S: Storage> {
    pub config: Arc<BrokerConfig>,
    pub storage: S,
    pub mesh: Mesh,
    pub clock: Clock,
    /// The controller quorum, when this node is part of a cluster.
    pub cluster: Option<Arc<ControllerHandle>>,
}

pub struct Node<S: Storage> {
    pub config: Arc<BrokerConfig>,
    pub clock: Clock,
    pub stats: Rc<ShardStats>,
    pub mesh: Rc<Mesh>,
    /// The controller quorum, in a cluster.
    pub cluster: Option<Arc<ControllerHandle>>,
    view: Rc<MetadataView>,
    partitions: Rc<PartitionService<S>>,
    groups: Rc<GroupService<S>>,
    transactions: Rc<TransactionService<S>>,
    metadata: Rc<MetadataService<S>>,
    replication: Rc<ReplicaFetchers<S>>,
    /// This shard's side of the client quotas.
    pub quotas: Rc<crate::services::quotas::QuotaService>,
    /// The fetch sessions of this shard's connections (KIP-227).
    pub fetch_sessions: SharedFetchSessions,
    /// Client requests this shard is handling now (read, not yet answered); shutdown waits for
    /// them to drain.
    requests_in_progress: Cell<usize>,
}

/// A shard's services, built before they go into its `Node`.
struct Services<S: Storage> {
    stats: Rc<ShardStats>,
    view: Rc<MetadataView>,
    partitions: Rc<PartitionService<S>>,
    groups: Rc<GroupService<S>>,
    transactions: Rc<TransactionService<S>>,
    metadata: Rc<MetadataService<S>>,
    replication: Rc<ReplicaFetchers<S>>,
    quotas: Rc<crate::services::quotas::QuotaService>,
    fetch_sessions: SharedFetchSessions,
}

impl<S: Storage> Node<S> {
    /// Builds this shard's services and registers them on its mesh (producer ids on shard 0).
    pub async fn build(parts: NodeParts<S>) -> Result<Rc<Self>, String> {
        let NodeParts { config, storage, mesh, clock, cluster } = parts;
        let mesh = Rc::new(mesh);
        let services = Self::services(&config, &storage, &mesh, &clock, cluster.clone());
        Self::register_services(&mesh, &services);
        if mesh.id() == METADATA_SHARD {
            let mut producer_ids = ProducerIdService::load(storage, &config.data_dir).await?;
            if let Some(cluster) = &cluster {
                producer_ids = producer_ids.in_cluster(config.node_id, cluster.clone());
            }
            mesh.register(Rc::new(producer_ids));
        }
        let Services {
            stats,
            view,
            partitions,
            groups,
            transactions,
            metadata,
            replication,
            quotas,
            fetch_sessions,
        } = services;
        let node = Rc::new(Node {
            config,
            clock,
            stats,
            mesh,
            cluster,
            view,
            partitions,
            groups,
            transactions,
            metadata,
            fetch_sessions,
            replication,
            quotas,
            requests_in_progress: Cell::new(0),
        });
        node.transactions.set_marker_writer(Rc::new(NodeMarkers { node: Rc::downgrade(&node) }));
        if node.config.transaction_partition_verification {
            let verifier = NodeVerifier { node: Rc::downgrade(&node) };
            node.partitions.set_txn_verifier(Some(Rc::new(verifier)));
        }
        Ok(node)
    }

    /// Builds this shard's services, each on the ones it calls.
    fn services(
        config: &BrokerConfig,
        storage: &S,
        mesh: &Rc<Mesh>,
        clock: &Clock,
        cluster: Option<Arc<ControllerHandle>>,
    ) -> Services<S> {
        let stats = Rc::new(ShardStats::default());
        let node = NodeId(config.node_id);
        let partitions = Rc::new(PartitionService::new(PartitionServiceParts {
            shard: mesh.id(),
            node,
            storage: storage.clone(),
            data_dir: config.data_dir.clone(),
            cache_bytes: config.cache_bytes,
            stats: stats.clone(),
            clock: clock.clone(),
        }));
        let (groups, transactions) = Self::coordinators(config, &partitions, &stats, mesh, clock);
        let view = Rc::new(MetadataView::default());
        let policy = PlacementPolicy { node, shard_count: mesh.shard_count() };
        let replication = Rc::new(ReplicaFetchers::new(node, mesh.id(), partitions.clone()));
        let metadata = Rc::new(MetadataService::new(
            view.clone(),
            partitions.clone(),
            replication.clone(),
            mesh.clone(),
            config.data_dir.clone(),
            policy,
            cluster,
        ));
        let quotas = Rc::new(crate::services::quotas::QuotaService::new(mesh.clone()));
        let fetch_sessions = Rc::new(RefCell::new(FetchSessions::new(
            u32::from(mesh.id().0),
            mesh.shard_count() as u32,
            SESSION_SLOTS,
            SESSION_PARTITIONS_MAX,
        )));
        Services {
            stats,
            view,
            partitions,
            groups,
            transactions,
            metadata,
            replication,
            quotas,
            fetch_sessions,
        }
    }

    /// The group and transaction coordinators, both on this shard's partitions.
    fn coordinators(
        config: &BrokerConfig,
        partitions: &Rc<PartitionService<S>>,
        stats: &Rc<ShardStats>,
        mesh: &Rc<Mesh>,
        clock: &Clock,
    ) -> (Rc<GroupService<S>>, Rc<TransactionService<S>>) {
        let group_config = GroupConfig {
            initial_rebalance_delay_ms: config.initial_rebalance_delay_ms,
            offsets_retention_ms: config.offsets_retention_ms,
            offsets_compact_bytes: config.offsets_compact_bytes,
        };
        let groups = Rc::new(GroupService::new(
            partitions.clone(),
            stats.clone(),
            group_config,
            clock.clone(),
        ));
        let transactions = Rc::new(TransactionService::new(
            partitions.clone(),
            stats.clone(),
            mesh.clone(),
            clock.clone(),
            TxnConfig {
                max_timeout_ms: config.transaction_max_timeout_ms,
                abort_interval_ms: config.transaction_abort_interval_ms,
                id_expiration_ms: config.transactional_id_expiration_ms,
                expiry_interval_ms: config.transaction_expiry_interval_ms,
            },
        ));
        (groups, transactions)
    }

    /// Registers this shard's services on its mesh, through which every shard reaches them.
    fn register_services(mesh: &Rc<Mesh>, services: &Services<S>) {
        mesh.register(services.partitions.clone());
        mesh.register(Rc::new(PartitionWaits::new(services.partitions.clone())));
        mesh.register(services.groups.clone());
        mesh.register(services.transactions.clone());
        mesh.register(services.metadata.clone());
        mesh.register(services.quotas.clone());
        mesh.register(Rc::new(StatsService::new(
            services.stats.clone(),
            services.partitions.clone(),
            services.groups.clone(),
            services.transactions.clone(),
            services.replication.clone(),
            services.fetch_sessions.clone(),
            mesh.clone(),
        )));
    }

    /// Takes the startup image (shard 0 first persists it when `persist`), opens this shard's
    /// partitions, replays its groups, and starts the mesh receivers and the timers.
    pub async fn start(
        self: &Rc<Self>,
        image: MetadataImage,
        persist: bool,
        receivers: Option<MeshReceivers>,
    ) -> Result<(), String> {
        let shard = self.mesh.id().0;
        if persist && self.mesh.id() == METADATA_SHARD {
            self.metadata.persist(&image).await?;
        }
        self.metadata.adopt_local(image).await.map_err(|e| format!("shard {shard}: {e}"))?;
        if self.mesh.id() == METADATA_SHARD && self.cluster.is_some() {
            // The startup image was the controller's newest when the shards started; the
            // follower publishes whatever was applied since, and every image after.
            shard::runtime::spawn(self.metadata.clone().follow(None)).detach();
        }
        let replayed = self
            .groups
            .replay()
            .await
            .map_err(|e| format!("shard {shard}: replaying offsets: {e}"))?;
        if replayed > 0 {
            tracing::info!(shard, records = replayed, "committed offsets replayed");
        }
        if let Some(receivers) = receivers {
            self.mesh.start(receivers);
        }
        if self.mesh.id() == METADATA_SHARD {
            self.partitions.remove_deleted_dirs().await;
        }
        shard::runtime::spawn(self.clone().maintenance()).detach();
        shard::runtime::spawn(self.groups.clone().tick()).detach();
        shard::runtime::spawn(self.quotas.clone().gossip()).detach();
        self.transactions.follow_leadership().await;
        shard::runtime::spawn(self.transactions.clone().tick()).detach();
        Ok(())
    }

    /// Flush-interval syncs, compaction and retention of this shard's partitions, forever.
    async fn maintenance(self: Rc<Self>) {
        let mut last_retention = self.clock.now_ms();
        loop {
            let interval = (self.config.retention_check_interval_ms.max(0) as u64)
                .clamp(10, MAINTENANCE_INTERVAL_MS);
            shard::runtime::sleep(Duration::from_millis(interval)).await;
            let now = self.clock.now_ms();
            let retention_due = now - last_retention >= self.config.retention_check_interval_ms;
            self.partitions.maintain(retention_due).await;
            if retention_due {
                last_retention = now;
            }
            self.propose_isr_changes().await;
        }
    }

    /// Asks the controller for the ISR changes this shard's leaders want (followers that fell
    /// behind for `replica.lag.time.max.ms` leave, caught-up ones come back), as Kafka's
    /// AlterPartition.
    async fn propose_isr_changes(&self) {
        if self.cluster.is_none() {
            return;
        }
        let lag_max = i64::try_from(self.config.replica_lag_time_max_ms).unwrap_or(i64::MAX);
        let image = self.metadata();
        let unfenced = |node: NodeId| image.brokers.get(&node).is_some_and(|b| !b.fenced);
        let changes = self.partitions.wanted_isr_changes(lag_max, &unfenced);
        if changes.is_empty() {
            return;
        }
        let items: Vec<(String, i32, i32, Vec<NodeId>)> = changes
            .iter()
            .map(|(key, epoch, isr)| (key.topic.clone(), key.partition.0, *epoch, isr.clone()))
            .collect();
        let results = self.change_metadata(MetadataChange::AlterIsr(self.node_id(), items)).await;
        for ((key, epoch, isr), result) in changes.iter().zip(results) {
            // A change made is logged and counted where the image applies it
            // (`Partitions::adopt`), once, as committed.
            if let Err(error) = result {
                let isr: Vec<i32> = isr.iter().map(|node| node.0).collect();
                tracing::info!(partition = %key, epoch, ?isr, %error, "ISR change not made");
            }
            self.partitions.isr_change_done(key);
        }
    }

    /// Tries to reopen this shard's offline partitions now (the maintenance loop does it every
    /// run, with back-off); returns those still offline. For tests on the simulated disk.
    pub async fn repair_offline(&self) -> Vec<wire::ids::TopicPartition> {
        self.partitions.repair_offline().await;
        self.partitions.offline_partitions()
    }

    /// Clean close of this shard's partitions (shutdown).
    pub async fn close(&self) {
        self.replication.stop_all();
        self.partitions.close_all().await;
    }

    pub fn shard(&self) -> ShardId {
        self.mesh.id()
    }

    pub fn node_id(&self) -> NodeId {
        NodeId(self.config.node_id)
    }

    pub fn metadata(&self) -> Rc<MetadataImage> {
        self.view.current()
    }

    /// Whether the request's principal may do `operation` on `resource` (always, with the
    /// authorizer off). A refusal is counted and logged (Kafka's authorizer logger).
    pub fn allowed(
        &self,
        context: &RequestContext,
        operation: AclOperation,
        resource: Resource<'_>,
    ) -> bool {
        let authorizer = &self.config.authorizer;
        if !authorizer.enabled {
            return true;
        }
        let principal = context.principal.to_string();
        let host = context.client_address.ip().to_string();
        let image = self.metadata();
        let allowed = authorizer.authorize(&image.acls, &principal, &host, operation, resource);
        if !allowed {
            self.stats.authorization_denied();
            tracing::debug!(%principal, %host, ?operation, ?resource, api = ?context.api_key,
                "authorization denied");
        }
        allowed
    }

    /// Whether the request's principal may do `operation` on some resource of `kind`
    /// (IDEMPOTENT_WRITE's "WRITE on any topic", KIP-679).
    pub fn allowed_any(
        &self,
        context: &RequestContext,
        operation: AclOperation,
        kind: crate::metadata::acl::ResourceType,
    ) -> bool {
        let authorizer = &self.config.authorizer;
        if !authorizer.enabled {
            return true;
        }
        let principal = context.principal.to_string();
        let host = context.client_address.ip().to_string();
        authorizer.authorize_any(&self.metadata().acls, &principal, &host, operation, kind)
    }

    /// An authorized-operations field (KIP-430): the operations of `operations` the request's
    /// principal may do on `resource`, or "not requested".
    pub fn authorized_operations(
        &self,
        context: &RequestContext,
        requested: bool,
        operations: &[AclOperation],
        resource: Resource<'_>,
    ) -> i32 {
        let principal = context.principal.to_string();
        let host = context.client_address.ip().to_string();
        self.config.authorizer.authorized_operations(
            requested,
            &self.metadata().acls,
            &principal,
            &host,
            operations,
            resource,
        )
    }

    /// (usable, total) bytes of the data directory's file system.
    pub fn disk_space(&self) -> std::io::Result<(u64, u64)> {
        self.partitions.storage().space(&self.config.data_dir)
    }

    pub fn requests_in_progress(&self) -> usize {
        self.requests_in_progress.get()
    }

    /// Counts a client request from decode to answer (see `InProgress`).
    pub fn request_started(&self) -> InProgress<'_, S> {
        self.requests_in_progress.set(self.requests_in_progress.get() + 1);
        InProgress(self)
    }

    /// The shard that owns `partition`, from its placement.
    pub fn partition_owner(&self, partition: &TopicPartition) -> Result<ShardId> {
        let image = self.metadata();
        let placement = image
            .placement(partition)
            .ok_or_else(|| BrokerError::UnknownTopicOrPartition(partition.to_string()))?;
        if placement.leader != self.node_id() {
            return Err(BrokerError::NotLeader(partition.to_string()));
        }
        Ok(placement.shard)
    }

    /// The shard coordinating `group` (the owner of its `__consumer_offsets` partition).
    pub fn group_coordinator(&self, group: &str) -> Result<ShardId> {
        let partition = TopicPartition::new(OFFSETS_TOPIC, partition_for_group(group));
        self.partition_owner(&partition).map_err(|error| match error {
            BrokerError::NotLeader(_) => BrokerError::Group(GroupError::NotCoordinator),
            _ => BrokerError::Group(GroupError::CoordinatorNotAvailable),
        })
    }

    /// Checks the leader epoch a client sent with a request for `partition` (Fetch v9+,
    /// ListOffsets v4+; -1 is none) against the partition's: older is FENCED_LEADER_EPOCH (the
    /// client's metadata is stale), newer is UNKNOWN_LEADER_EPOCH (this broker's is), as Kafka's
    /// `Partition.checkCurrentLeaderEpoch`, and checked before leadership as there.
    pub fn check_leader_epoch(&self, partition: &TopicPartition, epoch: i32) -> Result<()> {
        if epoch < 0 {
            return Ok(());
        }
        let image = self.metadata();
        let Some(placement) = image.placement(partition) else { return Ok(()) };
        match epoch.cmp(&placement.leader_epoch.0) {
            std::cmp::Ordering::Less => Err(BrokerError::FencedLeaderEpoch(partition.to_string())),
            std::cmp::Ordering::Greater => {
                Err(BrokerError::UnknownLeaderEpoch(partition.to_string()))
            }
            std::cmp::Ordering::Equal => Ok(()),
        }
    }

    /// The brokers clients may use: in a cluster the unfenced registered ones, else this one.
    pub fn brokers(&self) -> Vec<BrokerEndpoint> {
        if self.cluster.is_some() {
            return self
                .metadata()
                .live_brokers()
                .map(|broker| BrokerEndpoint {
                    node: broker.node,
                    host: broker.host.clone(),
                    port: i32::from(broker.port),
                    rack: broker.rack.clone(),
                })
                .collect();
        }
        vec![BrokerEndpoint {
            node: self.node_id(),
            host: self.config.advertise_host.clone(),
            port: self.config.advertise_port,
            rack: self.config.cluster.rack.clone(),
        }]
    }

    /// KIP-951's leader hint for a partition answered with `error_code`: for
    /// NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH, the leader and epoch this broker knows,
    /// and the leader's endpoint when it is live, so the client goes there without a Metadata
    /// round trip.
    pub fn leader_hint(
        &self,
        partition: &TopicPartition,
        error_code: i16,
    ) -> Option<(NodeId, i32, Option<BrokerEndpoint>)> {
        if !crate::error::answered::names_new_leader(error_code) {
            return None;
        }
        let image = self.metadata();
        let placement = image.placement(partition)?;
        if placement.leader.0 < 0 {
            return None;
        }
        Some((placement.leader, placement.leader_epoch.0, self.broker(placement.leader)))
    }

    /// The brokers as a client that came in on `listener` reaches them (Kafka advertises the
    /// endpoint of the client's own listener): a single node's advertised address of that
    /// listener; a cluster's live brokers' registered endpoints of that listener name (a
    /// broker without one is left out, as Kafka leaves it out; one registered before
    /// listeners were serves its one endpoint for all).
    pub fn brokers_on(&self, listener: &str) -> Vec<BrokerEndpoint> {
        if self.cluster.is_some() {
            return self
                .metadata()
                .live_brokers()
                .filter_map(|broker| {
                    let (host, port) = if broker.listeners.is_empty() {
                        (broker.host.clone(), broker.port)
                    } else {
                        let own = broker.listeners.iter().find(|l| l.name == listener)?;
                        (own.host.clone(), own.port)
                    };
                    Some(BrokerEndpoint {
                        node: broker.node,
                        host,
                        port: i32::from(port),
                        rack: broker.rack.clone(),
                    })
                })
                .collect();
        }
        let mut brokers = self.brokers();
        if let Some(own) = self.config.listeners.iter().find(|l| l.name == listener) {
            for broker in &mut brokers {
                broker.host = own.advertise_host.clone();
                broker.port = own.advertise_port;
            }
        }
        brokers
    }

    /// A live broker's endpoint on `listener` (see `brokers_on`).
    pub fn broker_on(&self, node: NodeId, listener: &str) -> Option<BrokerEndpoint> {
        self.brokers_on(listener).into_iter().find(|broker| broker.node == node)
    }

    /// A live broker's endpoint (its registered one: the inter-broker listener's).
    pub fn broker(&self, node: NodeId) -> Option<BrokerEndpoint> {
        self.brokers().into_iter().find(|broker| broker.node == node)
    }

    /// The active controller's node id as clients see it: the quorum's leader when it is a
    /// live broker (-1 while there is no leader), else this broker, which passes admin
    /// requests on through the quorum (as KRaft brokers name a broker: clients can only
    /// reach brokers); this node when it is a single node.
    pub fn controller_id(&self) -> i32 {
        match &self.cluster {
            Some(cluster) => {
                let Some(leader) = cluster.status.leader().and_then(|l| i32::try_from(l).ok())
                else {
                    return -1;
                };
                let image = self.metadata();
                let live = image.brokers.get(&NodeId(leader)).is_some_and(|b| !b.fenced);
                if live {
                    leader
                } else {
                    self.config.node_id
                }
            }
            None => self.config.node_id,
        }
    }

    /// A request for `partition`'s owner.
    pub async fn partition_call<R: Ask>(
        &self,
        partition: &TopicPartition,
        request: R,
    ) -> Result<R::Answer>
    where
        PartitionService<S>: Answers<R>,
    {
        let owner = self.partition_owner(partition)?;
        Ok(self.mesh.call::<PartitionService<S>, R>(owner, request).await?)
    }

    /// Starts `request` on shard `owner`'s partition service (`Mesh::start_call`): returns once it is
    /// queued there, with the answer to await.
    pub async fn partition_start<R: Ask>(
        &self,
        owner: ShardId,
        request: R,
    ) -> std::result::Result<crate::mesh::Call<R::Answer>, crate::error::MeshError>
    where
        PartitionService<S>: Answers<R>,
    {
        self.mesh.start_call::<PartitionService<S>, R>(owner, request).await
    }

    /// The same request to every shard's partition service.
    pub async fn partition_call_all<R: Ask>(
        &self,
        request: impl Fn() -> R,
    ) -> Vec<Result<R::Answer>>
    where
        PartitionService<S>: Answers<R>,
    {
        let answers = self.mesh.call_all::<PartitionService<S>, R>(request).await;
        answers.into_iter().map(|answer| answer.map_err(BrokerError::from)).collect()
    }

    /// Waits (at most `wait_ms`) on `partition`'s owner for an append past `offset`.
    /// With `log_end` (a follower's fetch) it waits for the log end, else the high watermark.
    pub async fn wait_for_append(
        &self,
        partition: &TopicPartition,
        offset: Offset,
        wait_ms: u64,
        log_end: bool,
    ) {
        let Ok(owner) = self.partition_owner(partition) else { return };
        let request = WaitForAppend { partition: partition.clone(), offset, wait_ms, log_end };
        let _ = self.mesh.call::<PartitionWaits<S>, _>(owner, request).await;
    }

    /// The shard coordinating `transactional_id` (the owner of its `__transaction_state`
    /// partition).
    pub fn txn_coordinator(&self, transactional_id: &str) -> Result<ShardId> {
        let partition = TopicPartition::new(
            TRANSACTION_STATE_TOPIC,
            partition_for_transactional_id(transactional_id),
        );
        self.partition_owner(&partition).map_err(|error| match error {
            BrokerError::NotLeader(_) => BrokerError::Txn(TxnError::NotCoordinator),
            _ => BrokerError::Txn(TxnError::CoordinatorNotAvailable),
        })
    }

    /// A request for `transactional_id`'s coordinator.
    pub async fn txn_call<R: Ask>(&self, transactional_id: &str, request: R) -> Result<R::Answer>
    where
        TransactionService<S>: Answers<R>,
    {
        let coordinator = self.txn_coordinator(transactional_id)?;
        Ok(self.mesh.call::<TransactionService<S>, R>(coordinator, request).await?)
    }

    /// The same request to every shard's transaction coordinator.
    pub async fn txn_call_all<R: Ask>(&self, request: impl Fn() -> R) -> Vec<Result<R::Answer>>
    where
        TransactionService<S>: Answers<R>,
    {
        let answers = self.mesh.call_all::<TransactionService<S>, R>(request).await;
        answers.into_iter().map(|answer| answer.map_err(BrokerError::from)).collect()
    }

    /// Writes a transaction marker on the leader of `partition`: a shard of this node, or
    /// another broker (WriteTxnMarkers).
    pub async fn write_marker(
        &self,
        partition: &TopicPartition,
        marker: MarkerSpec,
    ) -> std::result::Result<(), MarkerFailure> {
        let image = self.metadata();
        let Some(placement) = image.placement(partition) else {
            return Err(MarkerFailure::GiveUp(format!("{partition} no longer exists")));
        };
        if placement.leader != self.node_id() {
            let Some(endpoint) = self.broker(placement.leader) else {
                return Err(MarkerFailure::Retry(format!("{partition}: its leader is not known")));
            };
            let port = u16::try_from(endpoint.port).unwrap_or(0);
            return crate::services::transactions::remote::write_marker(
                &endpoint.host,
                port,
                partition,
                marker,
            )
            .await;
        }
        self.write_marker_here(partition, marker)
            .await
            .map_err(|error| classify_marker_error(partition, &error))
    }

    /// Partition verification (KIP-890 part 1): asks the coordinator of `transactional_id`
    /// (a shard of this node, or another broker with AddPartitionsToTxn v4 `verify_only`)
    /// whether `partition` is in the producer's ongoing transaction.
    pub async fn verify_in_transaction(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partition: &TopicPartition,
    ) -> std::result::Result<(), VerifyError> {
        let state = TopicPartition::new(
            TRANSACTION_STATE_TOPIC,
            partition_for_transactional_id(transactional_id),
        );
        let image = self.metadata();
        // Kafka: no __transaction_state (or no leader for it) is COORDINATOR_NOT_AVAILABLE.
        let unavailable =
            || VerifyError::Unavailable(format!("{state} has no leader for {transactional_id}"));
        let placement = image.placement(&state).ok_or_else(unavailable)?;
        if placement.leader == self.node_id() {
            let request = Verify {
                transactional_id: transactional_id.to_string(),
                producer_id,
                producer_epoch,
                partitions: vec![partition.clone()],
            };
            let verified = self.txn_call(transactional_id, request).await;
            let refusal = match verified.and_then(|verified| verified) {
                Ok(verified) if verified == [true] => None,
                Ok(_) => Some(VerifyError::NotInTransaction),
                Err(error) => VerifyError::from_coordinator_code(error_code(&error)),
            };
            return refusal.map_or(Ok(()), Err);
        }
        let code = {
            let endpoint = self.broker(placement.leader).ok_or_else(unavailable)?;
            let port = u16::try_from(endpoint.port).unwrap_or(0);
            crate::services::transactions::remote::verify_partition(
                &endpoint.host,
                port,
                transactional_id,
                producer_id,
                producer_epoch,
                partition,
            )
            .await
            .map_err(VerifyError::Unavailable)?
        };
        VerifyError::from_coordinator_code(code).map_or(Ok(()), Err)
    }

    /// Writes a transaction marker on `partition`, led by this node: through the group
    /// coordinator for an `__consumer_offsets` partition (its transactional offsets become
    /// visible or go), else on the partition's owner shard.
    pub async fn write_marker_here(
        &self,
        partition: &TopicPartition,
        marker: MarkerSpec,
    ) -> Result<()> {
        let owner = self.partition_owner(partition)?;
        if partition.topic == OFFSETS_TOPIC {
            let request = TxnMarker { partition: partition.clone(), marker };
            return self.mesh.call::<GroupService<S>, _>(owner, request).await?;
        }
        let request = requests::WriteMarker { partition: partition.clone(), marker };
        self.mesh.call::<PartitionService<S>, _>(owner, request).await?
    }

    /// A request for `group`'s coordinator.
    pub async fn group_call<R: Ask>(&self, group: &str, request: R) -> Result<R::Answer>
    where
        GroupService<S>: Answers<R>,
    {
        let coordinator = self.group_coordinator(group)?;
        Ok(self.mesh.call::<GroupService<S>, R>(coordinator, request).await?)
    }

    /// The same request to every shard's group coordinator.
    pub async fn group_call_all<R: Ask>(&self, request: impl Fn() -> R) -> Vec<Result<R::Answer>>
    where
        GroupService<S>: Answers<R>,
    {
        let answers = self.mesh.call_all::<GroupService<S>, R>(request).await;
        answers.into_iter().map(|answer| answer.map_err(BrokerError::from)).collect()
    }

    /// Decides, persists and publishes a metadata change on shard 0; a result per item.
    pub async fn change_metadata(&self, change: MetadataChange) -> Vec<Result<()>> {
        match self.mesh.call::<MetadataService<S>, _>(METADATA_SHARD, change).await {
            Ok(results) => results,
            Err(error) => vec![Err(BrokerError::from(error))],
        }
    }

    /// A producer id and epoch from shard 0's allocator.
    pub async fn init_producer_id(&self, producer_id: i64, epoch: i16) -> Result<(i64, i16)> {
        let request = InitProducerId { producer_id, epoch };
        self.mesh.call::<ProducerIdService<S>, _>(METADATA_SHARD, request).await?
    }

    /// Every shard's counters (shards that do not answer are left out).
    pub async fn stats_all(&self) -> Vec<(ShardId, Box<StatsReport>)> {
        let answers = self.mesh.call_all::<StatsService<S>, _>(|| Report).await;
        self.mesh
            .shards()
            .zip(answers)
            .filter_map(|(shard, answer)| answer.ok().map(|report| (shard, report)))
            .collect()
    }
}

/// Whether a marker that failed with `error` is sent again (Kafka's
/// `TransactionMarkerRequestCompletionHandler`): not when the producer or the coordinator was
/// fenced, or the partition is gone.
fn classify_marker_error(partition: &TopicPartition, error: &BrokerError) -> MarkerFailure {
    let why = format!("{partition}: {error}");
    match error {
        BrokerError::Storage(shard::StorageError::InvalidProducerEpoch { .. })
        | BrokerError::Storage(shard::StorageError::TransactionCoordinatorFenced { .. })
        | BrokerError::UnknownTopicOrPartition(_) => MarkerFailure::GiveUp(why),
        _ => MarkerFailure::Retry(why),
    }
}

/// The node as the transaction coordinator's marker writer.
struct NodeMarkers<S: Storage> {
    node: std::rc::Weak<Node<S>>,
}

impl<S: Storage> MarkerWriter for NodeMarkers<S> {
    fn write_marker(
        &self,
        partition: TopicPartition,
        marker: MarkerSpec,
    ) -> futures_util::future::LocalBoxFuture<'static, std::result::Result<(), MarkerFailure>> {
        let node = self.node.upgrade();
        Box::pin(async move {
            match node {
                Some(node) => node.write_marker(&partition, marker).await,
                None => Err(MarkerFailure::Retry("the node is shutting down".into())),
            }
        })
    }
}

/// The node as the partitions' transaction verifier (KIP-890 part 1).
struct NodeVerifier<S: Storage> {
    node: std::rc::Weak<Node<S>>,
}

impl<S: Storage> TxnVerifier for NodeVerifier<S> {
    fn verify(
        &self,
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        partition: TopicPartition,
    ) -> futures_util::future::LocalBoxFuture<'static, std::result::Result<(), VerifyError>> {
        let node = self.node.upgrade();
        Box::pin(async move {
            match node {
                Some(node) => {
                    node.verify_in_transaction(
                        &transactional_id,
                        producer_id,
                        producer_epoch,
                        &partition,
                    )
                    .await
                }
                None => Err(VerifyError::Unavailable("the node is shutting down".into())),
            }
        })
    }
}

/// Counts a request in `Node::requests_in_progress` until dropped.
pub struct InProgress<'a, S: Storage>(&'a Node<S>);

impl<S: Storage> Drop for InProgress<'_, S> {
    fn drop(&mut self) {
        let node = self.0;
        node.requests_in_progress.set(node.requests_in_progress.get().saturating_sub(1));
    }
}
