//! A minimal pipelining Kafka client on the shard runtime, for the load generator.
//!
//! One connection per task; requests are written as soon as the caller has them and answers are
//! read in order (Kafka answers a connection's requests in the order they were sent).

use bytes::Bytes;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use shard::runtime::net::TcpStream;
use wire::protocol::{self, FRAME_PREFIX_BYTES};

/// Partition errors a client retries (Kafka's RetriableException codes a produce or fetch can
/// answer): UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER,
/// REQUEST_TIMED_OUT, NETWORK_EXCEPTION, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
/// KAFKA_STORAGE_ERROR, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH.
pub const RETRIABLE: [i16; 10] = [3, 5, 6, 7, 13, 19, 20, 56, 74, 75];
/// OUT_OF_ORDER_SEQUENCE_NUMBER: an idempotent batch that reached a new leader before an
/// earlier batch of its partition (given back by the old leader, or lost with its connection)
/// was sent again. The Java client retries it while an earlier batch is unresolved; here it is
/// sent again after the earlier ones (the retry queue is oldest first), bounded by the
/// delivery timeout, so a real gap still ends the run with its name.
pub const OUT_OF_ORDER_SEQUENCE: i16 = 45;
/// The retriable errors that also say the leader this client knows is stale.
pub const STALE_LEADER: [i16; 7] = [3, 5, 6, 13, 56, 74, 75];
/// Kafka's name for a code, for reports (`NOT_LEADER_OR_FOLLOWER`).
pub fn error_name(code: i16) -> String {
    match code {
        3 => "UNKNOWN_TOPIC_OR_PARTITION".into(),
        5 => "LEADER_NOT_AVAILABLE".into(),
        6 => "NOT_LEADER_OR_FOLLOWER".into(),
        7 => "REQUEST_TIMED_OUT".into(),
        13 => "NETWORK_EXCEPTION".into(),
        19 => "NOT_ENOUGH_REPLICAS".into(),
        20 => "NOT_ENOUGH_REPLICAS_AFTER_APPEND".into(),
        56 => "KAFKA_STORAGE_ERROR".into(),
        74 => "FENCED_LEADER_EPOCH".into(),
        75 => "UNKNOWN_LEADER_EPOCH".into(),
        45 => "OUT_OF_ORDER_SEQUENCE_NUMBER".into(),
        other => format!("error {other}"),
    }
}

/// Largest response the load generator accepts.
pub const RESPONSE_BYTES_MAX: usize = 256 << 20;

/// A connection's bytes: plain TCP, or TLS to an SSL listener (`use_tls`).
pub trait Duplex: futures_lite::AsyncRead + futures_lite::AsyncWrite + Unpin {}
impl<T: futures_lite::AsyncRead + futures_lite::AsyncWrite + Unpin> Duplex for T {}
pub type Stream = Box<dyn Duplex>;

/// The TLS client config every connection uses once `use_tls` set it.
static TLS: std::sync::OnceLock<std::sync::Arc<rustls::ClientConfig>> = std::sync::OnceLock::new();

/// Connects over TLS from now on, trusting the CA certificates in `ca_file` (PEM).
pub fn use_tls(ca_file: &std::path::Path) -> Result<(), String> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    let certificates = rustls::pki_types::CertificateDer::pem_file_iter(ca_file)
        .map_err(|e| format!("--tls-ca {}: {e}", ca_file.display()))?;
    for certificate in certificates {
        let certificate =
            certificate.map_err(|e| format!("--tls-ca {}: {e}", ca_file.display()))?;
        roots.add(certificate).map_err(|e| format!("--tls-ca {}: {e}", ca_file.display()))?;
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let _ = TLS.set(std::sync::Arc::new(config));
    Ok(())
}

/// A connection to `address` (`host:port`), over TLS after `use_tls`.
async fn open(address: &str) -> Result<Stream, String> {
    let stream =
        TcpStream::connect(address).await.map_err(|e| format!("connecting to {address}: {e}"))?;
    let _ = stream.set_nodelay(true);
    let Some(config) = TLS.get() else {
        return Ok(Box::new(stream));
    };
    let host = address.rsplit_once(':').map_or(address, |(host, _)| host);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let name = rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| format!("{host}: {e}"))?;
    let connector = futures_rustls::TlsConnector::from(config.clone());
    let stream =
        connector.connect(name, stream).await.map_err(|e| format!("TLS to {address}: {e}"))?;
    Ok(Box::new(stream))
}

pub struct Connection {
    stream: Stream,
    next_correlation_id: i32,
    /// (correlation id, api, version) of requests written and not yet answered, oldest first.
    in_flight: std::collections::VecDeque<(i32, ApiKey, i16)>,
}

impl Connection {
    /// Connects to the first address of `bootstrap` (a comma-separated `host:port` list) that
    /// accepts.
    pub async fn connect(bootstrap: &str) -> Result<Self, String> {
        let mut failures = Vec::new();
        for address in bootstrap.split(',').map(str::trim).filter(|a| !a.is_empty()) {
            match open(address).await {
                Ok(stream) => {
                    return Ok(Self {
                        stream,
                        next_correlation_id: 1,
                        in_flight: Default::default(),
                    })
                }
                Err(error) => failures.push(error),
            }
        }
        if failures.is_empty() {
            return Err(format!("no address in {bootstrap:?}"));
        }
        Err(failures.join("; "))
    }

    /// Writes a request; `expect_answer` false for acks=0 produce.
    pub async fn send(
        &mut self,
        api: ApiKey,
        version: i16,
        request: RequestKind,
        expect_answer: bool,
    ) -> Result<(), String> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(api as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_static_str("strata-bench")));
        let frame = protocol::encode_request(&header, &request)?;
        self.stream.write_all(&frame).await.map_err(|e| format!("write: {e}"))?;
        if expect_answer {
            self.in_flight.push_back((correlation_id, api, version));
        }
        Ok(())
    }

    /// Reads the oldest outstanding answer.
    pub async fn recv(&mut self) -> Result<ResponseKind, String> {
        let (correlation_id, api, version) =
            self.in_flight.pop_front().ok_or("nothing in flight")?;
        let mut prefix = [0u8; FRAME_PREFIX_BYTES];
        self.stream.read_exact(&mut prefix).await.map_err(|e| format!("read: {e}"))?;
        let len = protocol::frame_len(prefix, RESPONSE_BYTES_MAX).map_err(|e| e.to_string())?;
        let mut body = vec![0u8; len];
        self.stream.read_exact(&mut body).await.map_err(|e| format!("read: {e}"))?;
        let (header, response) = protocol::decode_response(api, version, Bytes::from(body))
            .map_err(|e| e.to_string())?;
        if header.correlation_id != correlation_id {
            return Err(format!(
                "answer {} where {correlation_id} was expected",
                header.correlation_id
            ));
        }
        Ok(response)
    }

    pub async fn call(
        &mut self,
        api: ApiKey,
        version: i16,
        request: RequestKind,
    ) -> Result<ResponseKind, String> {
        self.send(api, version, request, true).await?;
        self.recv().await
    }
}

/// (producer id, epoch) from InitProducerId, for an idempotent producer.
pub async fn init_producer_id(connection: &mut Connection) -> Result<(i64, i16), String> {
    let mut request = InitProducerIdRequest::default();
    request.transactional_id = None;
    request.transaction_timeout_ms = 60_000;
    request.producer_id = ProducerId(-1);
    request.producer_epoch = -1;
    match connection.call(ApiKey::InitProducerId, 4, RequestKind::InitProducerId(request)).await? {
        ResponseKind::InitProducerId(response) if response.error_code == 0 => {
            Ok((response.producer_id.0, response.producer_epoch))
        }
        ResponseKind::InitProducerId(response) => {
            Err(format!("InitProducerId: error {}", response.error_code))
        }
        _ => Err("InitProducerId: unexpected answer".into()),
    }
}

/// Kafka's CONCURRENT_TRANSACTIONS and COORDINATOR_LOAD_IN_PROGRESS / NOT_AVAILABLE: retry.
const TXN_RETRIABLE: [i16; 3] = [51, 14, 15];
/// How long a transactional call is retried.
const TXN_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// Where `transactional_id`'s coordinator is (FindCoordinator, key type 1).
pub async fn txn_coordinator(bootstrap: &str, transactional_id: &str) -> Result<String, String> {
    let mut connection = Connection::connect(bootstrap).await?;
    let deadline = std::time::Instant::now() + TXN_PATIENCE;
    loop {
        let mut request = FindCoordinatorRequest::default();
        request.key = StrBytes::from_string(transactional_id.to_string());
        request.key_type = 1;
        match connection
            .call(ApiKey::FindCoordinator, 3, RequestKind::FindCoordinator(request))
            .await?
        {
            ResponseKind::FindCoordinator(r) if r.error_code == 0 => {
                return Ok(format!("{}:{}", r.host.as_str(), r.port))
            }
            ResponseKind::FindCoordinator(r)
                if TXN_RETRIABLE.contains(&r.error_code)
                    && std::time::Instant::now() < deadline =>
            {
                shard::runtime::sleep(std::time::Duration::from_millis(100)).await
            }
            ResponseKind::FindCoordinator(r) => {
                return Err(format!("FindCoordinator: error {}", r.error_code))
            }
            _ => return Err("FindCoordinator: unexpected answer".into()),
        }
    }
}

/// A transactional producer's calls to its coordinator (KIP-98, transaction version 1).
pub struct TxnCoordinator {
    connection: Connection,
    transactional_id: TransactionalId,
    pub producer: (i64, i16),
}

impl TxnCoordinator {
    /// InitProducerId for `transactional_id` on its coordinator.
    pub async fn init(bootstrap: &str, transactional_id: &str) -> Result<Self, String> {
        let address = txn_coordinator(bootstrap, transactional_id).await?;
        let mut connection = Connection::connect(&address).await?;
        let id = TransactionalId(StrBytes::from_string(transactional_id.to_string()));
        let deadline = std::time::Instant::now() + TXN_PATIENCE;
        loop {
            let mut request = InitProducerIdRequest::default();
            request.transactional_id = Some(id.clone());
            request.transaction_timeout_ms = 60_000;
            request.producer_id = ProducerId(-1);
            request.producer_epoch = -1;
            let answer =
                connection.call(ApiKey::InitProducerId, 4, RequestKind::InitProducerId(request));
            match answer.await? {
                ResponseKind::InitProducerId(r) if r.error_code == 0 => {
                    let producer = (r.producer_id.0, r.producer_epoch);
                    return Ok(Self { connection, transactional_id: id, producer });
                }
                ResponseKind::InitProducerId(r)
                    if TXN_RETRIABLE.contains(&r.error_code)
                        && std::time::Instant::now() < deadline =>
                {
                    shard::runtime::sleep(std::time::Duration::from_millis(20)).await
                }
                ResponseKind::InitProducerId(r) => {
                    return Err(format!("InitProducerId: error {}", r.error_code))
                }
                _ => return Err("InitProducerId: unexpected answer".into()),
            }
        }
    }

    /// AddPartitionsToTxn (v3) for `partitions` of `topic`.
    pub async fn add_partitions(&mut self, topic: &str, partitions: &[i32]) -> Result<(), String> {
        let deadline = std::time::Instant::now() + TXN_PATIENCE;
        loop {
            let mut wanted = add_partitions_to_txn_request::AddPartitionsToTxnTopic::default();
            wanted.name = topic_name(topic);
            wanted.partitions = partitions.to_vec();
            let mut request = AddPartitionsToTxnRequest::default();
            request.v3_and_below_transactional_id = self.transactional_id.clone();
            request.v3_and_below_producer_id = ProducerId(self.producer.0);
            request.v3_and_below_producer_epoch = self.producer.1;
            request.v3_and_below_topics = vec![wanted];
            let answer = self.connection.call(
                ApiKey::AddPartitionsToTxn,
                3,
                RequestKind::AddPartitionsToTxn(request),
            );
            let code = match answer.await? {
                ResponseKind::AddPartitionsToTxn(r) => r
                    .results_by_topic_v3_and_below
                    .iter()
                    .flat_map(|t| t.results_by_partition.iter().map(|p| p.partition_error_code))
                    .find(|code| *code != 0)
                    .unwrap_or(0),
                _ => return Err("AddPartitionsToTxn: unexpected answer".into()),
            };
            match code {
                0 => return Ok(()),
                code if TXN_RETRIABLE.contains(&code) && std::time::Instant::now() < deadline => {
                    shard::runtime::sleep(std::time::Duration::from_millis(20)).await
                }
                code => return Err(format!("AddPartitionsToTxn: error {code}")),
            }
        }
    }

    /// EndTxn (v3): commits (or aborts) the open transaction.
    pub async fn end(&mut self, commit: bool) -> Result<(), String> {
        let mut request = EndTxnRequest::default();
        request.transactional_id = self.transactional_id.clone();
        request.producer_id = ProducerId(self.producer.0);
        request.producer_epoch = self.producer.1;
        request.committed = commit;
        match self.connection.call(ApiKey::EndTxn, 3, RequestKind::EndTxn(request)).await? {
            ResponseKind::EndTxn(r) if r.error_code == 0 => Ok(()),
            ResponseKind::EndTxn(r) => Err(format!("EndTxn: error {}", r.error_code)),
            _ => Err("EndTxn: unexpected answer".into()),
        }
    }

    pub fn transactional_id(&self) -> &TransactionalId {
        &self.transactional_id
    }
}

pub fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

/// Creates `topic` with `partitions` partitions and `replication_factor` replicas (-1: the
/// broker's default) unless it exists.
pub async fn ensure_topic(
    connection: &mut Connection,
    topic: &str,
    partitions: i32,
    replication_factor: i16,
) -> Result<(), String> {
    let mut creatable = create_topics_request::CreatableTopic::default();
    creatable.name = topic_name(topic);
    creatable.num_partitions = partitions;
    creatable.replication_factor = replication_factor;
    let mut request = CreateTopicsRequest::default();
    request.topics = vec![creatable];
    request.timeout_ms = 30_000;
    if let ResponseKind::CreateTopics(response) =
        connection.call(ApiKey::CreateTopics, 5, RequestKind::CreateTopics(request)).await?
    {
        for result in response.topics {
            if result.error_code != 0 && result.error_code != 36 {
                return Err(format!("creating {topic}: error {}", result.error_code));
            }
        }
    }
    Ok(())
}

/// (log start, high watermark) of each of `partitions`, in their order, from one broker
/// (their leader).
pub async fn offsets(
    connection: &mut Connection,
    topic: &str,
    partitions: &[i32],
) -> Result<Vec<(i64, i64)>, String> {
    let mut columns = Vec::new();
    for timestamp in [-2i64, -1] {
        let mut entry = list_offsets_request::ListOffsetsTopic::default();
        entry.name = topic_name(topic);
        entry.partitions = partitions
            .iter()
            .map(|&index| {
                let mut partition = list_offsets_request::ListOffsetsPartition::default();
                partition.partition_index = index;
                partition.timestamp = timestamp;
                partition
            })
            .collect();
        let mut request = ListOffsetsRequest::default();
        request.replica_id = BrokerId(-1);
        request.topics = vec![entry];
        match connection.call(ApiKey::ListOffsets, 5, RequestKind::ListOffsets(request)).await? {
            ResponseKind::ListOffsets(response) => {
                let mut column = vec![0i64; partitions.len()];
                for partition in response.topics.into_iter().flat_map(|t| t.partitions) {
                    if partition.error_code != 0 {
                        return Err(format!(
                            "list offsets of partition {}: {}",
                            partition.partition_index,
                            error_name(partition.error_code)
                        ));
                    }
                    let at = partitions.iter().position(|p| *p == partition.partition_index);
                    if let Some(slot) = at.and_then(|at| column.get_mut(at)) {
                        *slot = partition.offset;
                    }
                }
                columns.push(column);
            }
            _ => return Err("unexpected answer".into()),
        }
    }
    Ok(columns[0].iter().zip(&columns[1]).map(|(s, e)| (*s, *e)).collect())
}

/// One partition's batch in a produce request, kept until it is acknowledged so that a
/// retriable failure can send it again (to the partition's leader of then).
#[derive(Clone)]
pub struct Batch {
    pub partition: i32,
    pub records: Bytes,
    /// When its first message was scheduled (ns since the epoch), and how many it holds.
    pub first_scheduled: u64,
    pub count: u64,
    /// When it was built: it must be acknowledged within the delivery timeout from then,
    /// however often it is sent again.
    pub created: std::time::Instant,
}

/// What a producer hears about its batches: each acknowledged, or given back to be sent again
/// with the retriable error code (`None`: the connection was lost).
#[derive(Clone)]
pub struct Outcomes {
    pub acknowledged: Rc<dyn Fn(&Batch)>,
    pub retry: Rc<dyn Fn(Batch, Option<i16>)>,
}

type InFlight = Rc<std::cell::RefCell<std::collections::VecDeque<(i32, Vec<Batch>)>>>;

/// Produce requests pipelined on one connection (to one broker), acknowledgements read by
/// their own task as they arrive (so their latency is measured on arrival, not when the sender
/// next looks). A lost connection gives every unacknowledged batch back (`Outcomes::retry`)
/// and the pipeline is dropped; a non-retriable error fails it.
pub struct ProducePipeline {
    writer: futures_lite::io::WriteHalf<Stream>,
    next_correlation_id: i32,
    permits: Rc<async_lock::Semaphore>,
    window: usize,
    queue: InFlight,
    failed: Rc<std::cell::RefCell<Option<String>>>,
    lost: Rc<std::cell::Cell<bool>>,
    outcomes: Outcomes,
    reader: Option<shard::runtime::Task<()>>,
    expect_answers: bool,
}

use std::rc::Rc;

/// Gives every batch still in flight back to be sent again (once: the queue empties).
fn abandon(queue: &InFlight, lost: &std::cell::Cell<bool>, outcomes: &Outcomes) {
    lost.set(true);
    let abandoned: Vec<(i32, Vec<Batch>)> = queue.borrow_mut().drain(..).collect();
    for batch in abandoned.into_iter().flat_map(|(_, batches)| batches) {
        (outcomes.retry)(batch, None);
    }
}

impl ProducePipeline {
    pub async fn connect(
        address: &str,
        window: usize,
        expect_answers: bool,
        outcomes: Outcomes,
    ) -> Result<Self, String> {
        let stream = open(address).await?;
        let (mut reader_half, writer) = futures_lite::io::split(stream);
        let permits = Rc::new(async_lock::Semaphore::new(window.max(1)));
        let queue: InFlight = Default::default();
        let failed: Rc<std::cell::RefCell<Option<String>>> = Default::default();
        let lost: Rc<std::cell::Cell<bool>> = Default::default();
        let reader = expect_answers.then(|| {
            let (permits, queue, failed) = (permits.clone(), queue.clone(), failed.clone());
            let (lost, outcomes) = (lost.clone(), outcomes.clone());
            shard::runtime::spawn(async move {
                loop {
                    let mut prefix = [0u8; FRAME_PREFIX_BYTES];
                    let read: Result<Vec<u8>, String> = async {
                        reader_half.read_exact(&mut prefix).await.map_err(|e| e.to_string())?;
                        let len = protocol::frame_len(prefix, RESPONSE_BYTES_MAX)
                            .map_err(|e| e.to_string())?;
                        let mut body = vec![0u8; len];
                        reader_half.read_exact(&mut body).await.map_err(|e| e.to_string())?;
                        Ok(body)
                    }
                    .await;
                    let body = match read {
                        Ok(body) => body,
                        Err(_) => {
                            abandon(&queue, &lost, &outcomes);
                            permits.add_permits(1 << 20); // the sender sees the loss
                            return;
                        }
                    };
                    if lost.get() {
                        return;
                    }
                    if let Err(error) = answer(body, &queue, &outcomes) {
                        *failed.borrow_mut() = Some(error);
                        permits.add_permits(1 << 20); // unblock the sender so it sees the failure
                        return;
                    }
                    permits.add_permits(1);
                }
            })
        });
        Ok(Self {
            writer,
            next_correlation_id: 1,
            permits,
            window: window.max(1),
            queue,
            failed,
            lost,
            outcomes,
            reader,
            expect_answers,
        })
    }

    fn check(&self) -> Result<(), String> {
        match self.failed.borrow().as_ref() {
            Some(error) => Err(error.clone()),
            None => Ok(()),
        }
    }

    /// Whether the connection was lost (its batches were given back): drop the pipeline.
    pub fn is_lost(&self) -> bool {
        self.lost.get()
    }

    /// Sends one produce request of `batches`, waiting for a free slot in the window first.
    /// On a lost connection the batches are given back (`Outcomes::retry`), not an error.
    pub async fn send(&mut self, request: RequestKind, batches: Vec<Batch>) -> Result<(), String> {
        if self.expect_answers {
            self.permits.acquire().await.forget();
        }
        self.check()?;
        if self.lost.get() {
            for batch in batches {
                (self.outcomes.retry)(batch, None);
            }
            return Ok(());
        }
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(ApiKey::Produce as i16)
            .with_request_api_version(7)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_static_str("strata-bench")));
        let frame = protocol::encode_request(&header, &request)?;
        if self.expect_answers {
            self.queue.borrow_mut().push_back((correlation_id, batches));
            if self.writer.write_all(&frame).await.is_err() {
                abandon(&self.queue, &self.lost, &self.outcomes);
            }
        } else if self.writer.write_all(&frame).await.is_err() {
            self.lost.set(true);
            for batch in batches {
                (self.outcomes.retry)(batch, None);
            }
        } else {
            // acks=0: written is all the acknowledgement there is.
            for batch in &batches {
                (self.outcomes.acknowledged)(batch);
            }
        }
        Ok(())
    }

    /// Waits until every request sent so far is answered (the window stays open), or the
    /// connection is lost.
    pub async fn drain(&mut self) -> Result<(), String> {
        if self.writer.flush().await.is_err() {
            abandon(&self.queue, &self.lost, &self.outcomes);
        }
        if self.expect_answers && !self.lost.get() {
            for _ in 0..self.window {
                self.permits.acquire().await.forget();
                self.check()?;
            }
            self.permits.add_permits(self.window);
        }
        self.check()
    }

    /// Waits for every outstanding answer.
    pub async fn finish(mut self) -> Result<(), String> {
        self.drain().await?;
        drop(self.reader.take());
        self.check()
    }
}

/// Reads one produce answer: each partition's batch acknowledged, given back on a retriable
/// error, or an error for the pipeline.
fn answer(body: Vec<u8>, queue: &InFlight, outcomes: &Outcomes) -> Result<(), String> {
    let (header, response) = protocol::decode_response(ApiKey::Produce, 7, Bytes::from(body))
        .map_err(|e| e.to_string())?;
    let (correlation_id, mut batches) =
        queue.borrow_mut().pop_front().ok_or("answer with nothing in flight")?;
    if header.correlation_id != correlation_id {
        return Err(format!(
            "answer {} where {correlation_id} was expected",
            header.correlation_id
        ));
    }
    let ResponseKind::Produce(response) = response else {
        return Err("unexpected answer to produce".into());
    };
    for partition in response.responses.into_iter().flat_map(|t| t.partition_responses) {
        let Some(at) = batches.iter().position(|b| b.partition == partition.index) else {
            continue;
        };
        let batch = batches.swap_remove(at);
        match partition.error_code {
            0 => (outcomes.acknowledged)(&batch),
            code if RETRIABLE.contains(&code) || code == OUT_OF_ORDER_SEQUENCE => {
                (outcomes.retry)(batch, Some(code))
            }
            code => {
                return Err(format!(
                    "produce to partition {}: {}",
                    partition.index,
                    error_name(code)
                ))
            }
        }
    }
    // A batch the answer did not mention was not written.
    for batch in batches {
        (outcomes.retry)(batch, Some(13));
    }
    Ok(())
}
