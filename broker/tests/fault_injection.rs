//! Issue #12, acceptance 3: a seeded fault-injection run of the broker (the real services and
//! handlers, `InProcess`) on the simulated disk. ENOSPC and EIO on writes, EIO on fdatasync,
//! ENOSPC on preallocation and EMFILE on opens (segment rolls, checkpoint and metadata files)
//! and read errors are injected at random under acks=all produce, fetch, crash + restart and
//! repair steps, and checked against a model of what was acknowledged:
//! - nothing acknowledged is lost (every acked record is read back at its offset, also after a
//!   crash);
//! - nothing unacknowledged is ever served (every record a fetch returns was acked at that
//!   offset);
//! - once the faults stop, every partition comes back online (the repair loop reopens it) and
//!   takes writes again.
//!
//! Every run takes the fixed seeds `0..SEEDS` (6) and one random seed (`seeds`), printed;
//! `SEED=<n> cargo test -p broker --test fault_injection` replays one run exactly.

mod requests;
mod seeds;

use broker::in_process::{test_config, InProcess};
use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use requests::fetch_request;
use shard::io::sim::{FaultConfig, SimStorage};
use std::collections::BTreeMap;
use std::time::Duration;
use wire::{BatchRecord, RecordBatchBuilder};

const TOPIC: &str = "faults";
const PARTITIONS: i32 = 2;
const OPERATIONS_PER_SEED: usize = 300;
const SEEDS_DEFAULT: u64 = 6;
const KAFKA_STORAGE_ERROR: i16 = 56;
const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const CORRUPT_MESSAGE: i16 = 2;

const FAULTS: FaultConfig = FaultConfig {
    read_error_probability: 0.02,
    write_error_probability: 0.02,
    sync_error_probability: 0.03,
    preallocate_error_probability: 0.02,
    open_error_probability: 0.03,
};

macro_rules! call {
    ($broker:expr, $version:expr, $request:expr, $kind:ident) => {
        match $broker.call($version, $request).await {
            Some(ResponseKind::$kind(response)) => response,
            other => panic!("expected a {} response, got {other:?}", stringify!($kind)),
        }
    };
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

async fn create_topic(broker: &InProcess) {
    let mut creatable = create_topics_request::CreatableTopic::default();
    creatable.name = topic_name(TOPIC);
    creatable.num_partitions = PARTITIONS;
    creatable.replication_factor = -1;
    // Small segments: rolls (new files) happen often.
    let mut config = create_topics_request::CreatableTopicConfig::default();
    config.name = StrBytes::from_static_str("segment.bytes");
    config.value = Some(StrBytes::from_static_str("2048"));
    creatable.configs = vec![config];
    let mut request = CreateTopicsRequest::default();
    request.topics = vec![creatable];
    let response = call!(broker, 4, request, CreateTopics);
    assert_eq!(response.topics[0].error_code, 0, "{response:?}");
}

/// Creates topic `name` (1 partition) under faults: the error code (0 on success).
async fn try_create(broker: &InProcess, name: &str) -> i16 {
    let mut creatable = create_topics_request::CreatableTopic::default();
    creatable.name = topic_name(name);
    creatable.num_partitions = 1;
    creatable.replication_factor = -1;
    let mut request = CreateTopicsRequest::default();
    request.topics = vec![creatable];
    call!(broker, 4, request, CreateTopics).topics[0].error_code
}

/// The topics the broker reports (Metadata for all topics).
async fn topics(broker: &InProcess) -> Vec<String> {
    let mut request = MetadataRequest::default();
    request.topics = None;
    let response = call!(broker, 9, request, Metadata);
    let mut names: Vec<String> = response
        .topics
        .iter()
        .filter_map(|topic| topic.name.as_ref().map(|name| name.0.to_string()))
        .filter(|name| !name.starts_with("__"))
        .collect();
    names.sort();
    names
}

/// Produces one record with acks=all; the base offset, or the error code.
async fn produce(broker: &InProcess, partition: i32, value: &str) -> Result<i64, i16> {
    let mut builder = RecordBatchBuilder::new(1_700_000_000_000);
    builder.push(BatchRecord { key: None, value: Some(value.as_bytes()), timestamp_delta: 0 });
    let mut data = produce_request::PartitionProduceData::default();
    data.index = partition;
    data.records = Some(Bytes::from(builder.build()));
    let mut topic_data = produce_request::TopicProduceData::default();
    topic_data.name = topic_name(TOPIC);
    topic_data.partition_data = vec![data];
    let mut request = ProduceRequest::default();
    request.acks = -1;
    request.timeout_ms = 10_000;
    request.topic_data = vec![topic_data];
    let response = call!(broker, 9, request, Produce);
    let answer = &response.responses[0].partition_responses[0];
    match answer.error_code {
        0 => Ok(answer.base_offset),
        code => Err(code),
    }
}

/// Fetches from `offset`: the (offset, value) of every record returned, or the error code.
async fn fetch(broker: &InProcess, partition: i32, offset: i64) -> Result<Vec<(i64, String)>, i16> {
    let request = fetch_request(TOPIC, partition, offset);
    let response = call!(broker, 11, request, Fetch);
    let answer = &response.responses[0].partitions[0];
    if answer.error_code != 0 {
        return Err(answer.error_code);
    }
    let mut records = Vec::new();
    let mut rest: &[u8] = answer.records.as_deref().unwrap_or_default();
    while !rest.is_empty() {
        let header = wire::RecordBatchHeader::parse(rest, 1 << 26).expect("a whole batch");
        for record in wire::compression::records_of(&header).expect("records") {
            let value = String::from_utf8(record.value.unwrap_or_default()).expect("utf-8");
            records.push((header.base_offset() + i64::from(record.offset_delta), value));
        }
        rest = &rest[header.size_bytes()..];
    }
    Ok(records)
}

/// What was acknowledged: per partition, offset → value.
#[derive(Default)]
struct Model {
    acked: BTreeMap<i32, BTreeMap<i64, String>>,
}

impl Model {
    /// No online partition's log ends before its last acknowledged record (ListOffsets latest):
    /// a loss is caught at the step after it, not only at the end.
    async fn check_log_ends(&self, broker: &InProcess, seed: u64, step: usize) {
        for partition in 0..PARTITIONS {
            let acked = self.acked.get(&partition).map_or(0, |acked| acked.len() as i64);
            let mut wanted = list_offsets_request::ListOffsetsPartition::default();
            wanted.partition_index = partition;
            wanted.timestamp = -1;
            let mut topic = list_offsets_request::ListOffsetsTopic::default();
            topic.name = topic_name(TOPIC);
            topic.partitions = vec![wanted];
            let mut request = ListOffsetsRequest::default();
            request.replica_id = BrokerId(-1);
            request.topics = vec![topic];
            let response = call!(broker, 1, request, ListOffsets);
            let answer = &response.topics[0].partitions[0];
            assert!(
                answer.error_code != 0 || answer.offset >= acked,
                "seed {seed} before step {step}: {TOPIC}-{partition} ends at {} with {acked} \
                 acknowledged",
                answer.offset
            );
        }
    }

    /// Every served record was acknowledged at that offset.
    fn check_served(&self, seed: u64, partition: i32, served: &[(i64, String)]) {
        let acked = self.acked.get(&partition);
        for (offset, value) in served {
            assert_eq!(
                acked.and_then(|acked| acked.get(offset)),
                Some(value),
                "seed {seed}: {TOPIC}-{partition} served {value:?} at {offset}, never acknowledged \
                 there"
            );
        }
    }
}

async fn restart(broker: InProcess, storage: &SimStorage, crash: bool) -> InProcess {
    storage.set_faults(FaultConfig::NONE);
    if crash {
        // The node's tasks stay on this executor, but its storage handle dies with the crash
        // (`SimStorage::process`), so they can never touch the disk again: as after a real
        // crash, only the new node does.
        drop(broker);
        storage.crash();
    } else {
        broker.close().await;
    }
    InProcess::start_on(test_config(), storage.process(), broker_clock()).await
}

fn broker_clock() -> broker::clock::Clock {
    broker::clock::Clock::manual()
}

async fn run_seed(seed: u64) {
    let storage = SimStorage::new(seed, FaultConfig::NONE);
    let mut broker = InProcess::start_on(test_config(), storage.process(), broker_clock()).await;
    create_topic(&broker).await;
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
    let mut model = Model::default();
    let mut failures: BTreeMap<i16, u64> = BTreeMap::new();
    // Topics created under faults: a created one must exist ever after, a refused one never.
    let mut created: Vec<String> = vec![TOPIC.to_string()];
    storage.set_faults(FAULTS);
    for step in 0..OPERATIONS_PER_SEED {
        model.check_log_ends(&broker, seed, step).await;
        let partition = rng.gen_range(0..PARTITIONS);
        match rng.gen_range(0..100) {
            0..=59 => {
                let value = format!("s{seed}-{step}");
                match produce(&broker, partition, &value).await {
                    Ok(offset) => {
                        let previous =
                            model.acked.entry(partition).or_default().insert(offset, value);
                        assert!(previous.is_none(), "seed {seed}: offset {offset} acked twice");
                    }
                    Err(code) => {
                        assert_eq!(
                            code, KAFKA_STORAGE_ERROR,
                            "seed {seed} step {step}: produce failed with {code}"
                        );
                        *failures.entry(code).or_default() += 1;
                    }
                }
            }
            60..=84 => {
                let end = model.acked.get(&partition).map_or(0, |acked| acked.len() as i64);
                let offset = rng.gen_range(0..=end);
                match fetch(&broker, partition, offset).await {
                    Ok(served) => model.check_served(seed, partition, &served),
                    Err(code) => assert!(
                        [KAFKA_STORAGE_ERROR, NOT_LEADER_OR_FOLLOWER, CORRUPT_MESSAGE, 1]
                            .contains(&code),
                        "seed {seed} step {step}: fetch failed with {code}"
                    ),
                }
            }
            85..=89 => {
                // A metadata write (and new partition files) under faults: all or nothing.
                let name = format!("created-{step}");
                match try_create(&broker, &name).await {
                    0 => created.push(name),
                    code => {
                        *failures.entry(code).or_default() += 1;
                    }
                }
                created.sort();
                let listed = topics(&broker).await;
                assert_eq!(listed, created, "seed {seed} step {step}: topics after a create");
            }
            90..=94 => {
                // The repair loop's next run (back-off passed).
                broker.clock.advance(Duration::from_secs(60));
                broker.node.repair_offline().await;
            }
            95..=97 => {
                broker = restart(broker, &storage, true).await;
                storage.set_faults(FAULTS);
            }
            _ => {
                broker = restart(broker, &storage, false).await;
                storage.set_faults(FAULTS);
            }
        }
    }
    let injected = storage.injected_write_errors();
    // The faults stop: every partition comes back online without a restart.
    storage.set_faults(FaultConfig::NONE);
    let mut still_offline = Vec::new();
    for _ in 0..5 {
        broker.clock.advance(Duration::from_secs(60));
        still_offline = broker.node.repair_offline().await;
        if still_offline.is_empty() {
            break;
        }
    }
    assert!(still_offline.is_empty(), "seed {seed}: still offline: {still_offline:?}");
    broker = restart(broker, &storage, true).await;
    assert_eq!(topics(&broker).await, created, "seed {seed}: topics after a crash");
    for partition in 0..PARTITIONS {
        // Everything acknowledged is there, in order, and nothing else.
        let acked = model.acked.get(&partition).cloned().unwrap_or_default();
        let mut read = Vec::new();
        let mut offset = 0;
        loop {
            let served = fetch(&broker, partition, offset).await.unwrap_or_else(|code| {
                panic!("seed {seed}: {TOPIC}-{partition} fetch at {offset} failed with {code}")
            });
            let Some(last) = served.last() else { break };
            offset = last.0 + 1;
            read.extend(served);
        }
        let expected: Vec<(i64, String)> = acked.into_iter().collect();
        assert_eq!(read, expected, "seed {seed}: {TOPIC}-{partition} after the faults");
        let offset = produce(&broker, partition, "after").await;
        assert!(offset.is_ok(), "seed {seed}: {TOPIC}-{partition} takes writes: {offset:?}");
    }
    println!(
        "seed {seed}: {} acked, failures {failures:?}, {injected} write-side faults injected, {} \
         read faults",
        model.acked.values().map(BTreeMap::len).sum::<usize>(),
        storage.injected_read_errors()
    );
    assert!(injected > 0, "seed {seed}: no fault was injected");
}

#[test]
fn faults_on_append_roll_sync_read_and_metadata_lose_nothing_acked_and_serve_nothing_else() {
    for seed in seeds::seeds("fault_injection", SEEDS_DEFAULT) {
        println!("fault injection seed {seed} (replay: SEED={seed})");
        InProcess::run(|| run_seed(seed));
    }
}
