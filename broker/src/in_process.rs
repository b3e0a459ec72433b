//! A broker node inside the calling process, on the simulated disk, with a manual clock: the
//! same services, mesh and handlers as the binary, with no sockets. Handler tests call the API
//! registry with a decoded request and compare the whole response; group tests advance the
//! clock to cross session and rebalance deadlines.
//!
//! One shard (every mesh call is answered in place). Must run inside a glommio executor
//! (`shard::runtime::run_local`); `InProcess::run` does that.

use crate::api;
use crate::clock::Clock;
use crate::config::{sources, BrokerConfig};
use crate::mesh::Mesh;
use crate::metadata::{startup_image, store, PlacementPolicy};
use crate::node::{Node, NodeParts};
use crate::request_context::RequestContext;
use kafka_protocol::messages::{RequestKind, ResponseKind};
use shard::io::sim::{FaultConfig, SimStorage};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use wire::ids::NodeId;

/// Where the simulated data directory lives.
pub const SIM_DATA_DIR: &str = "/strata-sim/data";
/// The shard's registered I/O memory in tests.
const TEST_IO_MEMORY_BYTES: usize = 512 << 10;

/// The broker's default configuration, pointed at the simulated data directory, one shard,
/// and no initial rebalance delay (tests drive rebalances with the clock).
pub fn test_config() -> BrokerConfig {
    let settings = sources::resolve(None, &|_| None, &[]).expect("the defaults are valid");
    let mut config = BrokerConfig::from_settings(&settings).expect("the defaults build");
    config.data_dir = PathBuf::from(SIM_DATA_DIR);
    config.cores = 1;
    config.initial_rebalance_delay_ms = 0;
    config
}

pub struct InProcess {
    pub node: Rc<Node<shard::io::sim::SimStorage>>,
    pub storage: SimStorage,
    pub clock: Clock,
}

impl InProcess {
    /// Runs `test` on a fresh executor on this thread.
    pub fn run<Fut: std::future::Future>(test: impl FnOnce() -> Fut) -> Fut::Output {
        shard::runtime::run_local(TEST_IO_MEMORY_BYTES, test()).expect("executor")
    }

    /// A node on a new simulated disk (seeded, no faults).
    pub async fn start(config: BrokerConfig, seed: u64) -> Self {
        let storage = SimStorage::new(seed, FaultConfig::NONE);
        Self::start_on(config, storage, Clock::manual()).await
    }

    /// A node on `storage` (a restart when it already holds a data directory).
    pub async fn start_on(config: BrokerConfig, storage: SimStorage, clock: Clock) -> Self {
        let config = Arc::new(config);
        let path = config.data_dir.join(store::METADATA_FILE);
        let stored = shard::io::read_whole_file(&storage, &path).await.expect("metadata file");
        let policy = PlacementPolicy { node: NodeId(config.node_id), shard_count: 1 };
        let (image, persist) =
            startup_image(stored.as_deref(), policy, [0x5e; 16]).expect("startup image");
        let parts = NodeParts {
            config,
            storage: storage.clone(),
            mesh: Mesh::single(),
            clock: clock.clone(),
            cluster: None,
        };
        let node = Node::build(parts).await.expect("node");
        node.start(image, persist, None).await.expect("start");
        InProcess { node, storage, clock }
    }

    /// Closes every partition cleanly (a graceful shutdown).
    pub async fn close(&self) {
        self.node.close().await;
    }

    /// Calls the handler of `request` as a connection whose request context is `context`
    /// would (a principal, a listener, a client address).
    pub async fn call_in(
        &self,
        context: &RequestContext,
        request: impl Into<RequestKind>,
    ) -> Option<ResponseKind> {
        api::dispatch(&self.node, context, request.into()).await
    }

    /// Calls the handler of `request` at `version`, as a connection would.
    pub async fn call(
        &self,
        version: i16,
        request: impl Into<RequestKind>,
    ) -> Option<ResponseKind> {
        let request = request.into();
        let context = RequestContext::internal(api::key_of(&request)?, version);
        api::dispatch(&self.node, &context, request).await
    }
}
