//! The dead-letter router (KIP-1191): a share partition's leader writes the records its group
//! archived (rejected, or released at the delivery limit) to the group's dead-letter topic,
//! the partition numbered as the source partition modulo the topic's partition count, with
//! acks=all: over the mesh to the shard that leads it here, or as a Produce request to the
//! broker that leads it elsewhere.
//!
//! As Kafka 4.4 checks at every write: the name must start with
//! `errors.deadletterqueue.topic.name.prefix` and not with `__`; an existing topic must have
//! opted in (`errors.deadletterqueue.group.enable=true`); a missing one is created (opted in)
//! only with `errors.deadletterqueue.auto.create.topics.enable`. A write that is refused or
//! fails is reported to the caller, which archives the records all the same (as Kafka).

use super::{MetadataRouter, Placements};
use crate::error::{BrokerError, Result};
use crate::metadata::decide::{CreateTopic, MetadataChange};
use crate::services::partitions::requests::Append;
use crate::services::partitions::{split_batches, PartitionService};
use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use shard::io::Storage;
use std::marker::PhantomData;
use std::time::Duration;
use wire::ids::TopicPartition;

/// The topic config by which a topic accepts dead letters (KIP-1191).
pub const GROUP_ENABLE_CONFIG: &str = "errors.deadletterqueue.group.enable";
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
const PRODUCE_VERSION: i16 = 9;
const CLIENT_ID: &str = "strata-dead-letters";

pub struct DeadLetterRouter<S: Storage> {
    placements: Placements,
    metadata: MetadataRouter<S>,
    prefix: String,
    auto_create: bool,
    pool: crate::peer::Pool,
    storage: PhantomData<S>,
}

impl<S: Storage> DeadLetterRouter<S> {
    pub fn new(
        placements: Placements,
        metadata: MetadataRouter<S>,
        prefix: String,
        auto_create: bool,
    ) -> Self {
        DeadLetterRouter {
            placements,
            metadata,
            prefix,
            auto_create,
            pool: crate::peer::Pool::new(CLIENT_ID, 4),
            storage: PhantomData,
        }
    }

    /// Writes `batch` (one uncompressed batch of dead letters) to `topic`, in the partition
    /// for `source_partition`.
    pub async fn write(&self, topic: &str, source_partition: i32, batch: Bytes) -> Result<()> {
        if topic.is_empty() || topic.starts_with("__") || !topic.starts_with(&self.prefix) {
            return Err(BrokerError::InvalidConfig(format!(
                "dead-letter topic {topic:?} must start with {:?} and not with __",
                self.prefix
            )));
        }
        let image = self.placements.image();
        let Some(described) = image.topic(topic) else {
            return Err(self.create(topic).await);
        };
        let enabled = described.configs.get(GROUP_ENABLE_CONFIG).is_some_and(|v| v == "true");
        if !enabled {
            return Err(BrokerError::InvalidConfig(format!(
                "topic {topic} does not take dead letters ({GROUP_ENABLE_CONFIG} is not true)"
            )));
        }
        let count = described.partition_count().max(1);
        let partition = TopicPartition::new(topic, source_partition.rem_euclid(count));
        let placement = image
            .placement(&partition)
            .ok_or_else(|| BrokerError::LeaderNotAvailable(partition.to_string()))?;
        if placement.leader == self.placements.node() {
            let append = Append {
                partitions: vec![(partition, split_batches(batch))],
                sync: true,
                timeout_ms: WRITE_TIMEOUT.as_millis() as u64,
                transactional_id: None,
            };
            let mesh = &self.placements.mesh;
            let mut answers = mesh.call::<PartitionService<S>, _>(placement.shard, append).await?;
            return answers.pop().map_or(Ok(()), |answer| answer.map(|_| ()));
        }
        self.produce_remote(placement.leader.0, &partition, batch).await
    }

    /// A missing dead-letter topic: created (opted in) when the broker allows it; the write
    /// is tried again at the next dead letter.
    async fn create(&self, topic: &str) -> BrokerError {
        if !self.auto_create {
            return BrokerError::UnknownTopicOrPartition(format!(
                "dead-letter topic {topic} does not exist (errors.deadletterqueue.auto.create.topics.enable is false)"
            ));
        }
        let mut create = CreateTopic {
            name: topic.to_string(),
            partitions: -1,
            replication_factor: -1,
            ..Default::default()
        };
        create.configs.insert(GROUP_ENABLE_CONFIG.to_string(), "true".to_string());
        for result in self.metadata.change(MetadataChange::CreateTopics(vec![create])).await {
            if let Err(error) = result {
                return error;
            }
        }
        BrokerError::LeaderNotAvailable(format!("dead-letter topic {topic} was just created"))
    }

    async fn produce_remote(
        &self,
        broker: i32,
        partition: &TopicPartition,
        batch: Bytes,
    ) -> Result<()> {
        let (host, port) = self
            .placements
            .endpoint(wire::ids::NodeId(broker))
            .ok_or_else(|| BrokerError::LeaderNotAvailable(format!("broker {broker}")))?;
        let mut data = produce_request::PartitionProduceData::default();
        data.index = partition.partition.0;
        data.records = Some(batch);
        let mut topic = produce_request::TopicProduceData::default();
        topic.name = TopicName(StrBytes::from_string(partition.topic.clone()));
        topic.partition_data = vec![data];
        let mut request = ProduceRequest::default();
        request.acks = -1;
        request.timeout_ms = WRITE_TIMEOUT.as_millis() as i32;
        request.topic_data = vec![topic];
        let answer = self
            .pool
            .call(
                (broker, &host, port),
                (ApiKey::Produce, PRODUCE_VERSION),
                RequestKind::Produce(request),
                1 << 20,
                WRITE_TIMEOUT,
            )
            .await
            .map_err(|why| BrokerError::RequestTimedOut(format!("broker {broker}: {why}")))?;
        let ResponseKind::Produce(response) = answer else {
            return Err(BrokerError::RequestTimedOut(format!(
                "broker {broker}: not a Produce answer"
            )));
        };
        let code = response
            .responses
            .iter()
            .flat_map(|t| t.partition_responses.iter())
            .map(|p| p.error_code)
            .next()
            .unwrap_or(crate::error::NONE);
        if code != crate::error::NONE {
            return Err(crate::error::answered::produce_error(code, partition));
        }
        Ok(())
    }
}

impl<S: Storage> crate::services::shares::DeadLetterSink for std::rc::Rc<DeadLetterRouter<S>> {
    fn write(
        &self,
        topic: String,
        source_partition: i32,
        batch: Bytes,
    ) -> futures_util::future::LocalBoxFuture<'static, Result<()>> {
        let router = self.clone();
        Box::pin(
            async move { DeadLetterRouter::write(&router, &topic, source_partition, batch).await },
        )
    }
}
