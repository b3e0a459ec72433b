//! Bounded resources against the real binary (issue: "bounded resources, with Kafka's keys"):
//! request bytes held stay within `queued.max.request.bytes` while stalled senders are closed
//! by the frame deadline and a normal client keeps being served; idle connections are closed
//! after `connections.max.idle.ms`; connections past `max.connections` wait and past
//! `max.connections.per.ip` are closed. (Batches that inflate to 2 GiB:
//! `tests/interop/test_resource_bounds.py`, where C zlib builds the gzip bomb in seconds.)

mod common;

use broker::cli::Client;
use bytes::Bytes;
use common::Broker;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;

/// A field of `/proc/<pid>/status` in bytes (VmRSS, VmHWM).
fn memory(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|value| value.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

/// Sum of a metric's series whose labels contain `labels` (e.g. `reason="idle"`).
fn metric_sum(broker: &Broker, name: &str, labels: &str) -> f64 {
    broker
        .http_get("/metrics")
        .lines()
        .filter(|line| line.starts_with(&format!("{name}{{")) && line.contains(labels))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn api_versions(client: &mut Client) -> Result<(), String> {
    match client.call(ApiKey::ApiVersions, 3, RequestKind::ApiVersions(Default::default()))? {
        ResponseKind::ApiVersions(response) if response.error_code == 0 => Ok(()),
        other => Err(format!("ApiVersions: {other:?}")),
    }
}

fn produce_request(topic: &str, batch: Bytes, acks: i16) -> ProduceRequest {
    let mut partition = produce_request::PartitionProduceData::default();
    partition.index = 0;
    partition.records = Some(batch);
    let mut topic_data = produce_request::TopicProduceData::default();
    topic_data.name = TopicName(StrBytes::from_string(topic.to_string()));
    topic_data.partition_data = vec![partition];
    let mut request = ProduceRequest::default();
    request.acks = acks;
    request.timeout_ms = 10_000;
    request.topic_data = vec![topic_data];
    request
}

/// Produces `batch` to partition 0 of `topic` with acks=1; the partition's error code.
fn produce(client: &mut Client, topic: &str, batch: Bytes) -> Result<i16, String> {
    let request = RequestKind::Produce(produce_request(topic, batch, 1));
    match client.call(ApiKey::Produce, 9, request)? {
        ResponseKind::Produce(r) => Ok(r.responses[0].partition_responses[0].error_code),
        other => Err(format!("Produce: {other:?}")),
    }
}

fn create_topic(client: &mut Client, name: &str, configs: &[(&str, &str)]) {
    let mut topic = create_topics_request::CreatableTopic::default();
    topic.name = TopicName(StrBytes::from_string(name.to_string()));
    topic.num_partitions = 1;
    topic.replication_factor = 1;
    for (key, value) in configs {
        let mut config = create_topics_request::CreatableTopicConfig::default();
        config.name = StrBytes::from_string(key.to_string());
        config.value = Some(StrBytes::from_string(value.to_string()));
        topic.configs.push(config);
    }
    let mut create = CreateTopicsRequest::default();
    create.topics = vec![topic];
    create.timeout_ms = 10_000;
    match client.call(ApiKey::CreateTopics, 5, RequestKind::CreateTopics(create)) {
        Ok(ResponseKind::CreateTopics(r)) => assert_eq!(r.topics[0].error_code, 0, "create {name}"),
        other => panic!("CreateTopics: {other:?}"),
    }
}

fn small_batch(value: &str) -> Bytes {
    let mut builder = wire::RecordBatchBuilder::new(1);
    builder.push(wire::BatchRecord {
        key: Some(b"k"),
        value: Some(value.as_bytes()),
        timestamp_delta: 0,
    });
    Bytes::from(builder.build())
}

/// What one stalling sender saw.
struct Stalled {
    sent: u64,
    closed_by_broker: bool,
}

/// Sends the prefix of a `frame_bytes` frame and then `body_bytes` of it, then stalls, until
/// the broker closes the connection or `give_up` passes.
fn stall(bootstrap: &str, frame_bytes: u32, body_bytes: u64, give_up: Instant) -> Stalled {
    let mut stream = TcpStream::connect(bootstrap).expect("connect");
    stream.set_write_timeout(Some(Duration::from_millis(200))).expect("timeout");
    stream.set_read_timeout(Some(Duration::from_millis(200))).expect("timeout");
    let mut sent = 0u64;
    let chunk = vec![0u8; 64 << 10];
    let closed = |error: &std::io::Error| {
        !matches!(error.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)
    };
    if stream.write_all(&frame_bytes.to_be_bytes()).is_err() {
        return Stalled { sent, closed_by_broker: true };
    }
    while sent < body_bytes && Instant::now() < give_up {
        let len = chunk.len().min((body_bytes - sent) as usize);
        match stream.write(&chunk[..len]) {
            Ok(written) => sent += written as u64,
            Err(error) if closed(&error) => return Stalled { sent, closed_by_broker: true },
            Err(_) => {}
        }
    }
    let mut byte = [0u8; 1];
    while Instant::now() < give_up {
        match stream.read(&mut byte) {
            Ok(0) => return Stalled { sent, closed_by_broker: true },
            Ok(_) => {}
            Err(error) if closed(&error) => return Stalled { sent, closed_by_broker: true },
            Err(_) => {}
        }
    }
    Stalled { sent, closed_by_broker: false }
}

/// 40 connections each send 99 MiB of a 100 MiB frame and stall. The broker reads at most its
/// request budget of them (256 MiB here), the frame deadline (5 s) closes every one, and a
/// normal client producing and reading metadata every 100 ms is served throughout.
#[test]
fn stalled_large_frames_stay_within_the_request_budget_and_are_closed_by_the_frame_deadline() {
    let budget = 256 * MIB;
    let broker = Broker::start(
        "bounds-memory",
        &[
            "--set",
            &format!("queued.max.request.bytes={budget}"),
            "--set",
            "socket.request.frame.timeout.ms=5000",
        ],
    );
    let pid = broker.child.id();
    let mut setup = Client::connect(&broker.bootstrap).expect("connect");
    create_topic(&mut setup, "normal", &[]);
    assert_eq!(produce(&mut setup, "normal", small_batch("warm-up")), Ok(0));
    std::thread::sleep(Duration::from_millis(500));
    let rss_before = memory(pid, "VmRSS");
    let stop = Arc::new(AtomicBool::new(false));
    let rss_peak = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (stop, rss_peak) = (stop.clone(), rss_peak.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                rss_peak.fetch_max(memory(pid, "VmRSS"), Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let normal = {
        let (stop, bootstrap) = (stop.clone(), broker.bootstrap.clone());
        std::thread::spawn(move || {
            let mut client = Client::connect(&bootstrap).expect("connect");
            client.set_timeout(Duration::from_secs(3)).expect("timeout");
            let (mut served, mut slowest) = (0u32, Duration::ZERO);
            while !stop.load(Ordering::SeqCst) {
                let started = Instant::now();
                api_versions(&mut client).expect("ApiVersions during the attack");
                let code = produce(&mut client, "normal", small_batch("during the attack"));
                assert_eq!(code, Ok(0), "produce during the attack");
                slowest = slowest.max(started.elapsed());
                served += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            (served, slowest)
        })
    };
    let give_up = Instant::now() + Duration::from_secs(30);
    let senders: Vec<_> = (0..40)
        .map(|_| {
            let bootstrap = broker.bootstrap.clone();
            std::thread::spawn(move || stall(&bootstrap, 100 << 20, 99 * MIB, give_up))
        })
        .collect();
    let stalled: Vec<Stalled> = senders.into_iter().map(|s| s.join().expect("sender")).collect();
    let held_at_most = metric_sum(&broker, "strata_queued_request_bytes_peak", "shard=");
    stop.store(true, Ordering::SeqCst);
    let (served, slowest) = normal.join().expect("the normal client was served");
    sampler.join().expect("sampler");
    let peak = rss_peak.load(Ordering::SeqCst).max(memory(pid, "VmHWM"));
    let fully_sent = stalled.iter().filter(|s| s.sent >= 99 * MIB).count();
    eprintln!(
        "rss before {} MiB, peak {} MiB (VmHWM {} MiB), request bytes held at most (sum of \
         shard peaks) {} MiB, {fully_sent} of 40 senders got all 99 MiB in, normal client \
         served {served} times, slowest {slowest:?}",
        rss_before / MIB,
        rss_peak.load(Ordering::SeqCst) / MIB,
        memory(pid, "VmHWM") / MIB,
        held_at_most as u64 / MIB,
    );
    assert!(stalled.iter().all(|s| s.closed_by_broker), "every stalled sender was closed");
    let closed =
        metric_sum(&broker, "strata_connections_closed_total", "reason=\"frame_deadline\"");
    assert!(closed >= 40.0, "the frame deadline closed them all ({closed})");
    assert!(fully_sent >= 1, "some senders did get their 99 MiB read (the budget admits them)");
    // The bound: the budget, plus what the broker held before the attack, plus 64 MiB for
    // allocator and socket slack.
    let bound = budget + rss_before + 64 * MIB;
    assert!(peak <= bound, "peak RSS {} MiB exceeds {} MiB", peak / MIB, bound / MIB);
    assert!(held_at_most as u64 <= budget + 32 * MIB, "request bytes held {held_at_most}");
    assert!(served >= 20, "the normal client kept being served ({served})");
    // Liveness, not speed (the house rule: timed figures are measured, not asserted): the
    // normal client is never starved while the attackers hold the budget. 2 s failed once at
    // 2.27 s on a busy run of this 2-core machine; starvation would be the 15 s frame deadline.
    assert!(slowest < Duration::from_secs(5), "slowest normal round trip {slowest:?}");
}

/// A connection that sends nothing for `connections.max.idle.ms` is closed; one that keeps
/// sending requests is not.
#[test]
fn idle_connections_are_closed_after_connections_max_idle_ms() {
    let broker = Broker::start("bounds-idle", &["--set", "connections.max.idle.ms=1500"]);
    let mut idle = TcpStream::connect(&broker.bootstrap).expect("connect");
    let mut busy = Client::connect(&broker.bootstrap).expect("connect");
    idle.set_read_timeout(Some(Duration::from_secs(6))).expect("timeout");
    let started = Instant::now();
    let closer = std::thread::spawn(move || {
        let mut byte = [0u8; 1];
        let read = idle.read(&mut byte);
        (read.map_err(|e| e.kind()), started.elapsed())
    });
    for _ in 0..10 {
        api_versions(&mut busy).expect("a busy connection stays open");
        std::thread::sleep(Duration::from_millis(400));
    }
    let (read, after) = closer.join().expect("reader");
    assert!(matches!(read, Ok(0)), "the idle connection was closed: {read:?}");
    assert!(after >= Duration::from_millis(1400) && after < Duration::from_secs(5), "{after:?}");
    api_versions(&mut busy).expect("still open after 4 s of requests");
    assert!(metric_sum(&broker, "strata_connections_closed_total", "reason=\"idle\"") >= 1.0);
}

/// An encoded ApiVersions v3 request.
fn api_versions_frame() -> Vec<u8> {
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::ApiVersions as i16)
        .with_request_api_version(3)
        .with_correlation_id(7)
        .with_client_id(Some(StrBytes::from_static_str("bounds")));
    wire::protocol::encode_request(&header, &RequestKind::ApiVersions(Default::default()))
        .expect("encode")
        .to_vec()
}

/// Past `max.connections`, a new connection is not served until another closes; then its
/// waiting request is answered.
#[test]
fn connections_past_max_connections_wait_until_one_closes() {
    let broker = Broker::start("bounds-max", &["--set", "max.connections=4"]);
    let mut open: Vec<Client> = (0..4)
        .map(|_| {
            let mut client = Client::connect(&broker.bootstrap).expect("connect");
            api_versions(&mut client).expect("within the limit");
            client
        })
        .collect();
    let mut fifth = TcpStream::connect(&broker.bootstrap).expect("the kernel still connects it");
    fifth.write_all(&api_versions_frame()).expect("send");
    fifth.set_read_timeout(Some(Duration::from_millis(1500))).expect("timeout");
    let mut prefix = [0u8; 4];
    let early = fifth.read(&mut prefix);
    assert!(early.is_err(), "the fifth is not served while four are open: {early:?}");
    let refused =
        metric_sum(&broker, "strata_connections_refused_total", "reason=\"max_connections\"");
    assert!(refused >= 1.0, "counted in /metrics ({refused})");
    drop(open.pop());
    fifth.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    fifth.read_exact(&mut prefix).expect("answered once a slot is free");
    assert!(i32::from_be_bytes(prefix) > 0, "a response frame");
}

/// Past `max.connections.per.ip`, a new connection from that address is closed at once.
#[test]
fn connections_past_max_connections_per_ip_are_closed() {
    let broker = Broker::start("bounds-per-ip", &["--set", "max.connections.per.ip=2"]);
    let mut first = Client::connect(&broker.bootstrap).expect("connect");
    let mut second = Client::connect(&broker.bootstrap).expect("connect");
    api_versions(&mut first).expect("first");
    api_versions(&mut second).expect("second");
    let mut third = TcpStream::connect(&broker.bootstrap).expect("the kernel connects it");
    third.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    let mut byte = [0u8; 1];
    let read = third.read(&mut byte);
    assert!(
        matches!(read, Ok(0))
            || read.as_ref().is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
        "the third connection from one address is closed: {read:?}"
    );
    assert!(metric_sum(&broker, "strata_connections_refused_total", "reason=\"per_ip\"") >= 1.0);
    drop(first);
    std::thread::sleep(Duration::from_millis(200));
    let mut again = Client::connect(&broker.bootstrap).expect("connect");
    api_versions(&mut again).expect("a freed slot takes a new connection");
}
