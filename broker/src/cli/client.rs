//! A small blocking Kafka client for the CLI: one TCP connection, one request at a time, using
//! `wire::protocol` and the `kafka-protocol` message types. Not for the data path.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseKind};
use kafka_protocol::protocol::StrBytes;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;
use wire::protocol::{self, FRAME_PREFIX_BYTES};

/// Largest response the CLI accepts.
pub const RESPONSE_BYTES_MAX: usize = 256 << 20;
/// How long connecting to one address may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a response may take, unless a command sets its own (`set_timeout`).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A connection's bytes: plain TCP, or TLS over it (`security.protocol=ssl|sasl_ssl`).
enum Stream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Stream {
    fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(stream) => stream,
            Stream::Tls(stream) => &stream.sock,
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(stream) => stream.read(buffer),
            Stream::Tls(stream) => stream.read(buffer),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buffer: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(stream) => stream.write(buffer),
            Stream::Tls(stream) => stream.write(buffer),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Plain(stream) => stream.flush(),
            Stream::Tls(stream) => stream.flush(),
        }
    }
}

pub struct Client {
    stream: Stream,
    /// The address connected to, named in every error.
    address: String,
    /// How long a response may take.
    timeout: Duration,
    next_correlation_id: i32,
}

impl Client {
    /// Connects to the first address of `bootstrap` (comma-separated `host:port` list, as
    /// Kafka's tools take) that accepts within `CONNECT_TIMEOUT`.
    pub fn connect(bootstrap: &str) -> Result<Self, String> {
        let mut failures = Vec::new();
        for address in bootstrap.split(',').map(str::trim).filter(|a| !a.is_empty()) {
            match connect_one(address) {
                Ok(stream) => return Self::secure(stream, address),
                Err(error) => failures.push(format!("{address}: {error}")),
            }
        }
        if failures.is_empty() {
            return Err(format!("no address to connect to in {bootstrap:?}"));
        }
        Err(format!("connecting to {bootstrap}: {}", failures.join("; ")))
    }

    /// TLS and the login over a connected socket, as this process is configured
    /// (`security`).
    fn secure(stream: TcpStream, address: &str) -> Result<Self, String> {
        stream.set_read_timeout(Some(REQUEST_TIMEOUT)).map_err(|e| e.to_string())?;
        stream.set_write_timeout(Some(REQUEST_TIMEOUT)).map_err(|e| e.to_string())?;
        let _ = stream.set_nodelay(true);
        let security = super::security::current();
        let stream = match &security.tls {
            None => Stream::Plain(stream),
            Some(config) => {
                let host = address.rsplit_once(':').map_or(address, |(host, _)| host);
                let host = host.trim_start_matches('[').trim_end_matches(']');
                let name = rustls::pki_types::ServerName::try_from(host.to_string())
                    .map_err(|e| format!("{address}: {e}"))?;
                let mut connection = rustls::ClientConnection::new(config.clone(), name)
                    .map_err(|e| format!("TLS to {address}: {e}"))?;
                let mut socket = stream;
                while connection.is_handshaking() {
                    connection
                        .complete_io(&mut socket)
                        .map_err(|e| format!("TLS handshake with {address}: {e}"))?;
                }
                Stream::Tls(Box::new(rustls::StreamOwned::new(connection, socket)))
            }
        };
        let mut client = Self {
            stream,
            address: address.to_string(),
            timeout: REQUEST_TIMEOUT,
            next_correlation_id: 1,
        };
        if let Some(login) = &security.login {
            super::security::authenticate(&mut client, login)?;
        }
        Ok(client)
    }

    /// The address this client is connected to.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// How long a response (and sending a request) may take.
    pub fn set_timeout(&mut self, timeout: Duration) -> Result<(), String> {
        self.timeout = timeout;
        self.stream.tcp().set_read_timeout(Some(timeout)).map_err(|e| e.to_string())?;
        self.stream.tcp().set_write_timeout(Some(timeout)).map_err(|e| e.to_string())
    }

    /// Sends `request` as `version` of `api_key` and returns the decoded response.
    pub fn call(
        &mut self,
        api_key: ApiKey,
        version: i16,
        request: RequestKind,
    ) -> Result<ResponseKind, String> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id += 1;
        let header = RequestHeader::default()
            .with_request_api_key(api_key as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_static_str("strata-cli")));
        let frame = protocol::encode_request(&header, &request)?;
        let address = &self.address;
        self.stream
            .write_all(&frame)
            .and_then(|()| self.stream.flush())
            .map_err(|e| format!("sending {api_key:?} to {address}: {e}"))?;
        let mut prefix = [0u8; FRAME_PREFIX_BYTES];
        self.stream
            .read_exact(&mut prefix)
            .map_err(|e| read_error(api_key, address, self.timeout, &e))?;
        let len = protocol::frame_len(prefix, RESPONSE_BYTES_MAX)
            .map_err(|e| format!("{address} answered {api_key:?} with no Kafka frame: {e}"))?;
        let mut body = vec![0u8; len];
        self.stream
            .read_exact(&mut body)
            .map_err(|e| read_error(api_key, address, self.timeout, &e))?;
        let (header, response) = protocol::decode_response(api_key, version, Bytes::from(body))
            .map_err(|e| format!("{address} answered {api_key:?} with no Kafka response: {e}"))?;
        if header.correlation_id != correlation_id {
            return Err(format!(
                "correlation id {} does not match {correlation_id}",
                header.correlation_id
            ));
        }
        Ok(response)
    }
}

/// Connects to one `host:port`, trying each address it resolves to within `CONNECT_TIMEOUT`.
fn connect_one(address: &str) -> Result<TcpStream, String> {
    let resolved = address.to_socket_addrs().map_err(|e| e.to_string())?;
    let mut last = String::from("resolves to no address");
    for socket_address in resolved {
        match TcpStream::connect_timeout(&socket_address, CONNECT_TIMEOUT) {
            Ok(stream) => return Ok(stream),
            Err(error) => last = error.to_string(),
        }
    }
    Err(last)
}

fn read_error(api_key: ApiKey, address: &str, timeout: Duration, error: &std::io::Error) -> String {
    match error.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => format!(
            "{address} did not answer {api_key:?} within {} ms (is it a Kafka listener?)",
            timeout.as_millis()
        ),
        _ => format!("reading the {api_key:?} response from {address}: {error}"),
    }
}

/// Kafka's retriable codes after which a client asks for Metadata again: UNKNOWN_TOPIC_OR_PARTITION,
/// LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
/// FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH.
pub const RETRIABLE: [i16; 8] = [3, 5, 6, 7, 19, 20, 74, 75];
/// How long a command waits for a topic's partitions to have leaders, or tries a partition again.
pub const LEADER_WAIT: Duration = Duration::from_secs(30);

/// A topic's partition leaders and a connection to each, made on first use: what `produce` and
/// `consume` need on a cluster (each partition is served by its leader only).
pub struct Leaders {
    bootstrap: String,
    topic: String,
    /// Partition -> leader id (-1: none now).
    leaders: Vec<i32>,
    /// Broker id -> `host:port`.
    brokers: std::collections::BTreeMap<i32, String>,
    connections: std::collections::BTreeMap<i32, Client>,
}

impl Leaders {
    /// The leaders of `topic`, waiting (up to `LEADER_WAIT`) until each partition has one. A
    /// topic that does not exist is an error, unless `create` (Metadata's auto-creation, as a
    /// producer's first write does where the cluster allows it).
    pub fn discover(bootstrap: &str, topic: &str, create: bool) -> Result<Self, String> {
        let mut leaders = Leaders {
            bootstrap: bootstrap.to_string(),
            topic: topic.to_string(),
            leaders: Vec::new(),
            brokers: Default::default(),
            connections: Default::default(),
        };
        let deadline = std::time::Instant::now() + LEADER_WAIT;
        loop {
            leaders.refresh(create)?;
            if !leaders.leaders.is_empty() && leaders.leaders.iter().all(|l| *l >= 0) {
                return Ok(leaders);
            }
            if std::time::Instant::now() >= deadline {
                return Err(format!(
                    "topic {topic}: partitions without a leader after {} s",
                    LEADER_WAIT.as_secs()
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Asks Metadata again (of the bootstrap list).
    pub fn refresh(&mut self, create: bool) -> Result<(), String> {
        use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
        use kafka_protocol::messages::{MetadataRequest, TopicName};
        let mut client = Client::connect(&self.bootstrap)?;
        let mut entry = MetadataRequestTopic::default();
        entry.name = Some(TopicName(StrBytes::from_string(self.topic.clone())));
        let mut request = MetadataRequest::default();
        request.topics = Some(vec![entry]);
        request.allow_auto_topic_creation = create;
        let response = match client.call(ApiKey::Metadata, 9, RequestKind::Metadata(request))? {
            ResponseKind::Metadata(response) => response,
            _ => return Err("unexpected response".into()),
        };
        let meta = response.topics.into_iter().next().ok_or("no topic in the answer")?;
        if super::is_error(meta.error_code, ResponseError::UnknownTopicOrPartition) && !create {
            return Err(format!("topic {} does not exist", self.topic));
        }
        // Being created (auto-creation), or its leaders being elected: asked again.
        if !super::is_error(meta.error_code, ResponseError::LeaderNotAvailable)
            && !super::is_error(meta.error_code, ResponseError::UnknownTopicOrPartition)
        {
            super::check(meta.error_code, None, &format!("topic {}", self.topic))?;
        }
        self.brokers = response
            .brokers
            .into_iter()
            .map(|b| (b.node_id.0, format!("{}:{}", b.host.as_str(), b.port)))
            .collect();
        let mut leaders = vec![-1; meta.partitions.len()];
        for partition in meta.partitions {
            if let Some(slot) =
                usize::try_from(partition.partition_index).ok().and_then(|i| leaders.get_mut(i))
            {
                *slot = if partition.error_code == 0 { partition.leader_id.0 } else { -1 };
            }
        }
        self.leaders = leaders;
        // Connections to brokers that lead nothing now are dropped.
        let leading: Vec<i32> = self.leaders.clone();
        self.connections.retain(|id, _| leading.contains(id));
        Ok(())
    }

    pub fn partition_count(&self) -> i32 {
        self.leaders.len() as i32
    }

    /// The leader of `partition` (-1: none now).
    pub fn leader_of(&self, partition: i32) -> i32 {
        usize::try_from(partition).ok().and_then(|i| self.leaders.get(i)).copied().unwrap_or(-1)
    }

    /// A connection to broker `leader`, made on first use.
    pub fn connection(&mut self, leader: i32) -> Result<&mut Client, String> {
        if !self.connections.contains_key(&leader) {
            let address = self
                .brokers
                .get(&leader)
                .ok_or_else(|| format!("broker {leader} is not in Metadata"))?;
            let client = Client::connect(address)?;
            self.connections.insert(leader, client);
        }
        self.connections.get_mut(&leader).ok_or_else(|| "no connection".to_string())
    }

    /// Forgets the connection to `leader` (after an error on it).
    pub fn drop_connection(&mut self, leader: i32) {
        self.connections.remove(&leader);
    }

    /// The topic's partitions grouped by their leader (leaderless ones left out).
    pub fn by_leader(&self, partitions: &[i32]) -> std::collections::BTreeMap<i32, Vec<i32>> {
        let mut grouped: std::collections::BTreeMap<i32, Vec<i32>> = Default::default();
        for partition in partitions {
            let leader = self.leader_of(*partition);
            if leader >= 0 {
                grouped.entry(leader).or_default().push(*partition);
            }
        }
        grouped
    }
}
