//! Where a topic's partitions are led: Metadata from the bootstrap list (or any broker learnt
//! since), refreshed when a leader turns out stale, as the Java client's metadata does on
//! NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH and a lost connection.
//!
//! Runs on: the load generator's executors (each producer and consumer keeps its own).

use crate::kafka::{self, Connection};
use kafka_protocol::messages::*;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

pub use crate::kafka::{error_name, RETRIABLE, STALE_LEADER};

/// The least time between two Metadata requests (Kafka's `retry.backoff.ms`).
pub const REFRESH_INTERVAL_MIN: Duration = Duration::from_millis(100);
/// How long a topic's partitions may stay leaderless before a refresh gives up.
pub const LEADERS_PATIENCE: Duration = Duration::from_secs(30);

/// A topic's leaders and the brokers' addresses.
pub struct Leaders {
    bootstrap: String,
    topic: String,
    /// Broker id -> `host:port`.
    brokers: BTreeMap<i32, String>,
    /// Partition -> leader id (-1 while it has none).
    leaders: Vec<i32>,
    refreshed_at: Option<Instant>,
}

impl Leaders {
    /// The topic's leaders, waiting (up to `LEADERS_PATIENCE`) until every partition has one.
    pub async fn discover(bootstrap: &str, topic: &str) -> Result<Self, String> {
        let mut leaders = Leaders {
            bootstrap: bootstrap.to_string(),
            topic: topic.to_string(),
            brokers: BTreeMap::new(),
            leaders: Vec::new(),
            refreshed_at: None,
        };
        let deadline = Instant::now() + LEADERS_PATIENCE;
        loop {
            leaders.refresh().await?;
            if !leaders.leaders.is_empty() && leaders.leaders.iter().all(|l| *l >= 0) {
                return Ok(leaders);
            }
            if Instant::now() >= deadline {
                return Err(format!("{topic}: partitions without a leader: {:?}", leaders.leaders));
            }
            shard::runtime::sleep(REFRESH_INTERVAL_MIN).await;
        }
    }

    pub fn partition_count(&self) -> i32 {
        self.leaders.len() as i32
    }

    /// The leader of `partition` and its address; `None` while it has none.
    pub fn leader(&self, partition: i32) -> Option<(i32, &str)> {
        let id = *self.leaders.get(usize::try_from(partition).ok()?)?;
        self.brokers.get(&id).map(|address| (id, address.as_str()))
    }

    /// The address of broker `id`, if Metadata listed it.
    pub fn broker_address(&self, id: i32) -> Option<&str> {
        self.brokers.get(&id).map(String::as_str)
    }

    /// Asks for Metadata again unless it was asked less than `REFRESH_INTERVAL_MIN` ago.
    /// A failure leaves the map as it was (the caller retries later).
    pub async fn refresh_if_due(&mut self) {
        if self.refreshed_at.is_some_and(|at| at.elapsed() < REFRESH_INTERVAL_MIN) {
            return;
        }
        let _ = self.refresh().await;
    }

    /// Metadata of the topic from the bootstrap list, else from any broker known.
    pub async fn refresh(&mut self) -> Result<(), String> {
        self.refreshed_at = Some(Instant::now());
        let mut candidates = vec![self.bootstrap.clone()];
        candidates.extend(self.brokers.values().cloned());
        let mut last = String::new();
        for address in candidates {
            match self.refresh_from(&address).await {
                Ok(()) => return Ok(()),
                Err(error) => last = error,
            }
        }
        Err(last)
    }

    async fn refresh_from(&mut self, address: &str) -> Result<(), String> {
        let mut connection = Connection::connect(address).await?;
        let mut entry = metadata_request::MetadataRequestTopic::default();
        entry.name = Some(kafka::topic_name(&self.topic));
        let mut request = MetadataRequest::default();
        request.topics = Some(vec![entry]);
        request.allow_auto_topic_creation = false;
        let response =
            match connection.call(ApiKey::Metadata, 9, RequestKind::Metadata(request)).await? {
                ResponseKind::Metadata(response) => response,
                _ => return Err("Metadata: unexpected answer".into()),
            };
        let topic = response.topics.into_iter().next().ok_or("no topic in the answer")?;
        if topic.error_code != 0 {
            return Err(format!("topic {}: {}", self.topic, error_name(topic.error_code)));
        }
        self.brokers = response
            .brokers
            .into_iter()
            .map(|b| (b.node_id.0, format!("{}:{}", b.host.as_str(), b.port)))
            .collect();
        let mut leaders = vec![-1; topic.partitions.len()];
        for partition in topic.partitions {
            if let Some(slot) = usize::try_from(partition.partition_index)
                .ok()
                .and_then(|index| leaders.get_mut(index))
            {
                *slot = if partition.error_code == 0 { partition.leader_id.0 } else { -1 };
            }
        }
        self.leaders = leaders;
        Ok(())
    }
}

/// (log start, high watermark) of each partition, each asked of its leader.
pub async fn offsets(leaders: &Leaders, topic: &str) -> Result<Vec<(i64, i64)>, String> {
    let count = leaders.partition_count();
    let mut by_leader: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for partition in 0..count {
        let (_, address) =
            leaders.leader(partition).ok_or(format!("{topic}-{partition}: no leader"))?;
        by_leader.entry(address.to_string()).or_default().push(partition);
    }
    let mut bounds = vec![(0i64, 0i64); count as usize];
    for (address, partitions) in by_leader {
        let mut connection = Connection::connect(&address).await?;
        let found = kafka::offsets(&mut connection, topic, &partitions).await?;
        for (partition, bound) in partitions.iter().zip(found) {
            if let Some(slot) = bounds.get_mut(*partition as usize) {
                *slot = bound;
            }
        }
    }
    Ok(bounds)
}
