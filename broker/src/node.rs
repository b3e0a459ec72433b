//! `Node`: this broker as one shard sees it, the context every handler receives.
//!
//! Owns: the shard's services (built and registered on the mesh at startup), its metadata view,
//! its counters and clock, and the routers handlers reach the services through
//! (`crate::routers`: `partitions`, `groups`, `transactions`, `metadata_router`), never through
//! a service's state. What is the node's own: authorization, the brokers clients are told of,
//! leader hints, the controller's id, and the shard's maintenance.
//! Generic over the storage, so the same node runs on real files (`DmaStorage`) in the binary
//! and on the simulated disk (`SimStorage`) in in-process tests (`crate::in_process`).
//! Runs on: one shard (`Rc`).

use crate::authorization::{AclOperation, Resource};
use crate::clock::Clock;
use crate::config::BrokerConfig;
use crate::controller::quorum::ControllerHandle;
use crate::error::{BrokerError, Result};
use crate::mesh::{Mesh, MeshReceivers};
use crate::metadata::decide::MetadataChange;
use crate::metadata::{MetadataImage, PlacementPolicy};
use crate::request_context::RequestContext;
use crate::routers::{
    DeadLetterRouter, GroupRouter, MetadataRouter, PartitionRouter, Placements, ShareRouter,
    ShareStateRouter, TxnRouter,
};
use crate::services::fetch_sessions::{
    FetchSessions, SharedFetchSessions, SESSION_PARTITIONS_MAX, SESSION_SLOTS,
};
use crate::services::groups::consumer::ConsumerConfig;
use crate::services::groups::{GroupConfig, GroupService};
use crate::services::metadata::{MetadataService, MetadataView, METADATA_SHARD};
use crate::services::partitions::waits::PartitionWaits;
use crate::services::partitions::{PartitionService, PartitionServiceParts};
use crate::services::producer_ids::ProducerIdService;
use crate::services::replication::ReplicaFetchers;
use crate::services::share_sessions::ShareSessions;
use crate::services::share_state::ShareStateService;
use crate::services::shares::ShareService;
use crate::services::stats::{Report, StatsReport, StatsService};
use crate::services::transactions::{TransactionService, TxnConfig};
use crate::stats::ShardStats;
use shard::io::Storage;
use shard::runtime::ShardId;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
use wire::ids::{NodeId, TopicPartition};

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
    /// Routes to the shards that own partitions (and to partition leaders, for markers).
    pub partitions: Rc<PartitionRouter<S>>,
    /// Routes to group coordinators.
    pub groups: GroupRouter<S>,
    /// Routes to transaction coordinators (and the partitions' verification questions).
    pub transactions: Rc<TxnRouter<S>>,
    /// Routes metadata changes and producer-id requests to shard 0.
    pub metadata_router: MetadataRouter<S>,
    partition_service: Rc<PartitionService<S>>,
    group_service: Rc<GroupService<S>>,
    txn_service: Rc<TransactionService<S>>,
    metadata_service: Rc<MetadataService<S>>,
    replication: Rc<ReplicaFetchers<S>>,
    /// This shard's side of the client quotas.
    pub quotas: Rc<crate::services::quotas::QuotaService>,
    /// The fetch sessions of this shard's connections (KIP-227).
    pub fetch_sessions: SharedFetchSessions,
    /// Routes to share partitions (KIP-932), on their partitions' leader shards.
    pub shares: ShareRouter<S>,
    share_service: Rc<ShareService<S>>,
    /// The share sessions of this shard's connections (KIP-932).
    pub share_sessions: RefCell<ShareSessions>,
    /// Reaches the share coordinators (KIP-932), for share-group offsets.
    pub share_state: Rc<ShareStateRouter<S>>,
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
    shares: Rc<ShareService<S>>,
    shares_clock: Clock,
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
            shares,
            shares_clock: _,
        } = services;
        let placements = Placements::new(NodeId(config.node_id), view.clone(), mesh.clone());
        let partition_router = Rc::new(PartitionRouter::new(placements.clone()));
        let txn_router = Rc::new(TxnRouter::new(placements.clone()));
        // The services that ask another domain hold its router (never the node).
        transactions.set_marker_writer(Rc::new(partition_router.clone()));
        // Share partitions persist their state through the share coordinators.
        let state_replicas =
            if cluster.is_some() { config.offsets_topic_replication_factor } else { 1 };
        let share_state = Rc::new(ShareStateRouter::new(
            placements.clone(),
            MetadataRouter::new(mesh.clone()),
            state_replicas,
        ));
        shares.set_state_router(Rc::new(share_state.clone()));
        let dead_letters: Rc<DeadLetterRouter<S>> = Rc::new(DeadLetterRouter::new(
            placements.clone(),
            MetadataRouter::new(mesh.clone()),
            config.dead_letters.prefix.clone(),
            config.dead_letters.auto_create,
        ));
        shares.set_dead_letter_router(Rc::new(dead_letters));
        if config.transaction_partition_verification {
            partitions.set_txn_verifier(Some(Rc::new(txn_router.clone())));
        }
        Ok(Rc::new(Node {
            config,
            clock,
            stats,
            metadata_router: MetadataRouter::new(mesh.clone()),
            mesh,
            cluster,
            view,
            partitions: partition_router,
            groups: GroupRouter::new(placements.clone()),
            shares: ShareRouter::new(placements),
            share_service: shares,
            share_sessions: RefCell::new(ShareSessions::default()),
            share_state,
            transactions: txn_router,
            partition_service: partitions,
            group_service: groups,
            txn_service: transactions,
            metadata_service: metadata,
            fetch_sessions,
            replication,
            quotas,
            requests_in_progress: Cell::new(0),
        }))
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
            write_buffer_bytes: config.write_buffer_bytes,
            segment_files_open_max: config.segment_files_per_shard,
            stats: stats.clone(),
            clock: clock.clone(),
        }));
        let view = Rc::new(MetadataView::default());
        let (groups, transactions) =
            Self::coordinators(config, &partitions, &stats, mesh, clock, &view);
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
        let shares = Rc::new(ShareService::new(
            partitions.clone(),
            stats.clone(),
            clock.clone(),
            view.clone(),
            config.share_partition_idle_ms,
        ));
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
            shares,
            shares_clock: clock.clone(),
        }
    }

    /// The group and transaction coordinators, both on this shard's partitions.
    fn coordinators(
        config: &BrokerConfig,
        partitions: &Rc<PartitionService<S>>,
        stats: &Rc<ShardStats>,
        mesh: &Rc<Mesh>,
        clock: &Clock,
        view: &Rc<MetadataView>,
    ) -> (Rc<GroupService<S>>, Rc<TransactionService<S>>) {
        let group_config = GroupConfig {
            initial_rebalance_delay_ms: config.initial_rebalance_delay_ms,
            offsets_retention_ms: config.offsets_retention_ms,
            offsets_compact_bytes: config.offsets_compact_bytes,
            consumer: ConsumerConfig::from_settings(&config.consumer_groups),
            share: crate::services::groups::share::ShareConfig::default(),
            authorizer: config.authorizer.clone(),
        };
        let groups = Rc::new(GroupService::new(
            partitions.clone(),
            stats.clone(),
            group_config,
            clock.clone(),
            view.clone(),
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
        mesh.register(services.shares.clone());
        mesh.register(Rc::new(ShareStateService::new(
            services.partitions.clone(),
            services.shares_clock.clone(),
        )));
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
            self.metadata_service.persist(&image).await?;
        }
        self.metadata_service
            .adopt_local(image)
            .await
            .map_err(|e| format!("shard {shard}: {e}"))?;
        if self.mesh.id() == METADATA_SHARD && self.cluster.is_some() {
            // The startup image was the controller's newest when the shards started; the
            // follower publishes whatever was applied since, and every image after.
            shard::runtime::spawn(self.metadata_service.clone().follow(None)).detach();
        }
        let replayed = self
            .group_service
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
            self.partition_service.remove_deleted_dirs().await;
        }
        shard::runtime::spawn(self.clone().maintenance()).detach();
        shard::runtime::spawn(self.partition_service.clone().release_idle_forever()).detach();
        shard::runtime::spawn(self.group_service.clone().tick()).detach();
        shard::runtime::spawn(self.share_service.clone().tick()).detach();
        shard::runtime::spawn(self.quotas.clone().gossip()).detach();
        self.txn_service.follow_leadership().await;
        shard::runtime::spawn(self.txn_service.clone().tick()).detach();
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
            self.partition_service.maintain(retention_due).await;
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
        let changes = self.partition_service.wanted_isr_changes(lag_max, &unfenced);
        if changes.is_empty() {
            return;
        }
        let items: Vec<(String, i32, i32, Vec<NodeId>)> = changes
            .iter()
            .map(|(key, epoch, isr)| (key.topic.clone(), key.partition.0, *epoch, isr.clone()))
            .collect();
        let results =
            self.metadata_router.change(MetadataChange::AlterIsr(self.node_id(), items)).await;
        for ((key, epoch, isr), result) in changes.iter().zip(results) {
            // A change made is logged and counted where the image applies it
            // (`Partitions::adopt`), once, as committed.
            if let Err(error) = result {
                let isr: Vec<i32> = isr.iter().map(|node| node.0).collect();
                tracing::info!(partition = %key, epoch, ?isr, %error, "ISR change not made");
            }
            self.partition_service.isr_change_done(key);
        }
    }

    /// Tries to reopen this shard's offline partitions now (the maintenance loop does it every
    /// run, with back-off); returns those still offline. For tests on the simulated disk.
    pub async fn repair_offline(&self) -> Vec<wire::ids::TopicPartition> {
        self.partition_service.repair_offline().await;
        self.partition_service.offline_partitions()
    }

    /// Clean close of this shard's partitions (shutdown).
    pub async fn close(&self) {
        self.replication.stop_all();
        self.partition_service.close_all().await;
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
        self.partition_service.storage().space(&self.config.data_dir)
    }

    pub fn requests_in_progress(&self) -> usize {
        self.requests_in_progress.get()
    }

    /// Counts a client request from decode to answer (see `InProgress`).
    pub fn request_started(&self) -> InProgress<'_, S> {
        self.requests_in_progress.set(self.requests_in_progress.get() + 1);
        InProgress(self)
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

    /// A connection closed: its share sessions end, and the records their members hold on
    /// those partitions are released (KIP-932: a consumer that went away does not keep its
    /// records until their locks time out).
    pub async fn share_sessions_closed(&self, connection_id: u64) {
        let closed = self.share_sessions.borrow_mut().connection_closed(connection_id);
        for (key, session) in closed {
            for partition in session.partitions.into_keys() {
                let request = crate::services::shares::requests::ReleaseMember {
                    group: key.0.clone(),
                    member: key.1.clone(),
                    partitions: vec![partition.clone()],
                };
                let _ = self.shares.call(&partition, request).await;
            }
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

    /// Every shard's counters (shards that do not answer are left out).
    /// Every shard's counters and histograms (lighter than `stats_all`).
    pub async fn counters_all(&self) -> Vec<Box<crate::stats::Counters>> {
        let answers =
            self.mesh.call_all::<StatsService<S>, _>(|| crate::services::stats::Sample).await;
        answers.into_iter().filter_map(Result::ok).collect()
    }

    pub async fn stats_all(&self) -> Vec<(ShardId, Box<StatsReport>)> {
        let answers = self.mesh.call_all::<StatsService<S>, _>(|| Report).await;
        self.mesh
            .shards()
            .zip(answers)
            .filter_map(|(shard, answer)| answer.ok().map(|report| (shard, report)))
            .collect()
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
