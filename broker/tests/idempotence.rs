//! Idempotent produce over the wire (issue #6): InitProducerId hands out ids unique for the life
//! of the data directory (also across a SIGKILL) and bumps epochs (KIP-360); Produce answers a
//! retry with the original offset and each sequence/epoch error with Kafka's code; producer
//! state survives a SIGKILL restart.

mod common;

use broker::cli::Client;
use bytes::Bytes;
use common::Broker;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use wire::{BatchRecord, RecordBatchBuilder};

fn init(client: &mut Client, producer_id: i64, epoch: i16) -> (i16, i64, i16) {
    let mut request = InitProducerIdRequest::default();
    request.transactional_id = None;
    request.transaction_timeout_ms = 60_000;
    request.producer_id = ProducerId(producer_id);
    request.producer_epoch = epoch;
    match client.call(ApiKey::InitProducerId, 4, RequestKind::InitProducerId(request)) {
        Ok(ResponseKind::InitProducerId(r)) => (r.error_code, r.producer_id.0, r.producer_epoch),
        other => panic!("InitProducerId: {other:?}"),
    }
}

/// Produces one batch of `records` records; (error code, base offset).
fn produce(
    client: &mut Client,
    topic: &str,
    producer: (i64, i16),
    sequence: i32,
    records: usize,
) -> (i16, i64) {
    // Real timestamps: producer state expires producer.id.expiration.ms after a batch's time.
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let mut builder = RecordBatchBuilder::new(now_ms);
    builder.producer(producer.0, producer.1, sequence);
    for i in 0..records {
        let value = format!("{sequence}-{i}");
        builder.push(BatchRecord { key: None, value: Some(value.as_bytes()), timestamp_delta: 0 });
    }
    produce_batch(client, topic, Bytes::from(builder.build()))
}

/// Produces one encoded batch to partition 0 with acks=all; (error code, base offset).
fn produce_batch(client: &mut Client, topic: &str, batch: Bytes) -> (i16, i64) {
    let mut partition = produce_request::PartitionProduceData::default();
    partition.index = 0;
    partition.records = Some(batch);
    let mut topic_data = produce_request::TopicProduceData::default();
    topic_data.name = TopicName(StrBytes::from_string(topic.to_string()));
    topic_data.partition_data = vec![partition];
    let mut request = ProduceRequest::default();
    request.acks = -1;
    request.timeout_ms = 10_000;
    request.topic_data = vec![topic_data];
    match client.call(ApiKey::Produce, 9, RequestKind::Produce(request)) {
        Ok(ResponseKind::Produce(r)) => {
            let p = &r.responses[0].partition_responses[0];
            (p.error_code, p.base_offset)
        }
        other => panic!("Produce: {other:?}"),
    }
}

const NONE: i16 = 0;
const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
const INVALID_PRODUCER_EPOCH: i16 = 47;

#[test]
fn producer_ids_are_unique_across_a_sigkill_and_epochs_bump() {
    let mut broker = Broker::start("producer-ids", &[]);
    let mut client = Client::connect(&broker.bootstrap).expect("connect");
    let (code, first, epoch) = init(&mut client, -1, -1);
    assert_eq!((code, epoch), (NONE, 0));
    let (_, second, _) = init(&mut client, -1, -1);
    assert!(second > first);
    assert_eq!(init(&mut client, second, 0), (NONE, second, 1), "KIP-360 epoch bump");
    let (_, unknown, epoch) = init(&mut client, 1 << 40, 3);
    assert!(unknown > second && epoch == 0, "an id never given out gets a fresh one");
    // A transactional id gets an id of its own from its coordinator, stored in
    // __transaction_state.
    let (code, transactional, epoch) = init_transactional(&mut client, "tx");
    assert_eq!(code, NONE);
    assert!(transactional > unknown && epoch == 0, "{transactional} {epoch}");
    drop(client);
    let _ = broker.child.kill();
    let _ = broker.child.wait();
    let data_dir = broker.data_dir.clone();
    let port: u16 =
        broker.bootstrap.rsplit_once(':').and_then(|(_, p)| p.parse().ok()).unwrap_or(0);
    let restarted = Broker::start_in(data_dir, port, common::free_port(), &[]);
    broker = restarted;
    let mut client = Client::connect(&broker.bootstrap).expect("connect");
    let (_, after, _) = init(&mut client, -1, -1);
    assert!(
        after > transactional,
        "ids after a SIGKILL ({after}) are past every id before it ({transactional})"
    );
    // The transactional id's state was replayed: the same id, the next epoch.
    assert_eq!(init_transactional(&mut client, "tx"), (NONE, transactional, 1));
}

/// InitProducerId v4 for `transactional_id` (a 60 s transaction timeout).
fn init_transactional(client: &mut Client, transactional_id: &str) -> (i16, i64, i16) {
    let mut request = InitProducerIdRequest::default();
    request.transactional_id =
        Some(TransactionalId(StrBytes::from_string(transactional_id.to_string())));
    request.transaction_timeout_ms = 60_000;
    request.producer_id = ProducerId(-1);
    request.producer_epoch = -1;
    match client.call(ApiKey::InitProducerId, 4, RequestKind::InitProducerId(request)) {
        Ok(ResponseKind::InitProducerId(r)) => (r.error_code, r.producer_id.0, r.producer_epoch),
        other => panic!("{other:?}"),
    }
}

#[test]
fn retries_get_the_original_offset_and_errors_get_kafkas_codes_also_after_a_sigkill() {
    let broker = Broker::start("idempotent-produce", &[]);
    broker::cli::topic::create(&broker.bootstrap, "t", 1, -1, &[], None).expect("create");
    let mut client = Client::connect(&broker.bootstrap).expect("connect");
    let (_, id, epoch) = init(&mut client, -1, -1);
    let producer = (id, epoch);
    assert_eq!(produce(&mut client, "t", producer, 0, 3), (NONE, 0));
    assert_eq!(produce(&mut client, "t", producer, 3, 2), (NONE, 3));
    assert_eq!(produce(&mut client, "t", producer, 0, 3), (NONE, 0), "a retry: original offset");
    assert_eq!(produce(&mut client, "t", producer, 9, 1).0, OUT_OF_ORDER_SEQUENCE_NUMBER);
    assert_eq!(produce(&mut client, "t", (id, epoch + 1), 4, 1).0, OUT_OF_ORDER_SEQUENCE_NUMBER);
    // A producer this partition does not know may start at any sequence (Kafka 2.5+: its
    // state may have been removed by retention or DeleteRecords while it went on).
    let (_, other, other_epoch) = init(&mut client, -1, -1);
    assert_eq!(produce(&mut client, "t", (other, other_epoch), 8, 1), (NONE, 5));
    assert_eq!(
        produce(&mut client, "t", (other, other_epoch), 10, 1).0,
        OUT_OF_ORDER_SEQUENCE_NUMBER
    );
    // Bump the epoch: sequences restart at 0, the old epoch is fenced.
    let (_, _, bumped) = init(&mut client, id, epoch);
    assert_eq!(produce(&mut client, "t", (id, bumped), 0, 1), (NONE, 6));
    assert_eq!(produce(&mut client, "t", producer, 5, 1).0, INVALID_PRODUCER_EPOCH);
    let metrics = broker.http_get("/metrics");
    let duplicates: u64 = metrics
        .lines()
        .filter(|line| line.starts_with("strata_produce_duplicate_batches_total{"))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    assert_eq!(duplicates, 1, "the one retry is counted on /metrics");

    // After a SIGKILL the state is rebuilt from the log: the retry is still recognised.
    let data_dir = broker.data_dir.clone();
    let port: u16 =
        broker.bootstrap.rsplit_once(':').and_then(|(_, p)| p.parse().ok()).unwrap_or(0);
    drop(client);
    drop(broker);
    let broker = Broker::start_in(data_dir, port, common::free_port(), &[]);
    let mut client = Client::connect(&broker.bootstrap).expect("connect");
    assert_eq!(produce(&mut client, "t", (id, bumped), 0, 1), (NONE, 6), "retry after restart");
    assert_eq!(produce(&mut client, "t", (id, bumped), 1, 1), (NONE, 7));
    assert_eq!(produce(&mut client, "t", producer, 5, 1).0, INVALID_PRODUCER_EPOCH);
}

/// A transactional batch in a request without a transactional id is refused with
/// TRANSACTIONAL_ID_AUTHORIZATION_FAILED (as Kafka), and a control batch (only brokers write
/// those) with INVALID_RECORD.
#[test]
fn transactional_batches_without_an_id_and_control_batches_are_refused() {
    let broker = Broker::start("no-transactions", &[]);
    broker::cli::topic::create(&broker.bootstrap, "t", 1, -1, &[], None).expect("create");
    let mut client = Client::connect(&broker.bootstrap).expect("connect");
    let with_attributes = |bits: i16| {
        let mut builder = RecordBatchBuilder::new(1_000);
        builder.producer(1, 0, 0);
        builder.push(BatchRecord { key: None, value: Some(b"v"), timestamp_delta: 0 });
        let mut bytes = builder.build();
        bytes[21..23].copy_from_slice(&bits.to_be_bytes()); // attributes
        let mut view =
            wire::record_batch::RecordBatchMut::new(&mut bytes, 1 << 20).expect("a valid batch");
        let max_timestamp = view.header().max_timestamp();
        view.set_max_timestamp_and_crc(max_timestamp); // recomputes the CRC
        Bytes::from(bytes)
    };
    assert_eq!(
        produce_batch(&mut client, "t", with_attributes(0x10)).0,
        53,
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    );
    assert_eq!(produce_batch(&mut client, "t", with_attributes(0x20)).0, 87, "INVALID_RECORD");
    // A transactional control batch: Kafka's transactional-id check comes first.
    assert_eq!(produce_batch(&mut client, "t", with_attributes(0x30)).0, 53);
}

/// DescribeProducers (KIP-664) lists each partition's idempotent producers with their epoch and
/// last sequence; an unknown partition gets UNKNOWN_TOPIC_OR_PARTITION.
#[test]
fn describe_producers_lists_the_producer_state() {
    let broker = Broker::start("describe-producers", &[]);
    broker::cli::topic::create(&broker.bootstrap, "t", 1, -1, &[], None).expect("create");
    let mut client = Client::connect(&broker.bootstrap).expect("connect");
    let (_, id, epoch) = init(&mut client, -1, -1);
    assert_eq!(produce(&mut client, "t", (id, epoch), 0, 3).0, NONE);
    assert_eq!(produce(&mut client, "t", (id, epoch), 3, 2).0, NONE);
    let mut topic = describe_producers_request::TopicRequest::default();
    topic.name = TopicName(StrBytes::from_static_str("t"));
    topic.partition_indexes = vec![0, 7];
    let mut request = DescribeProducersRequest::default();
    request.topics = vec![topic];
    let Ok(ResponseKind::DescribeProducers(response)) =
        client.call(ApiKey::DescribeProducers, 0, RequestKind::DescribeProducers(request))
    else {
        panic!("DescribeProducers");
    };
    let partitions = &response.topics[0].partitions;
    assert_eq!(partitions[0].error_code, NONE);
    let producers: Vec<(i64, i32, i32)> = partitions[0]
        .active_producers
        .iter()
        .map(|p| (p.producer_id.0, p.producer_epoch, p.last_sequence))
        .collect();
    assert_eq!(producers, vec![(id, i32::from(epoch), 4)]);
    assert!(partitions[0].active_producers[0].last_timestamp > 0);
    assert_eq!(partitions[1].error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION");
}
