//! The controller protocol: what controllers and brokers send each other over the CONTROLLER
//! listener (ARCHITECTURE.md, "Cluster control plane").
//!
//! Frame: `[len u32 LE][payload]`, payload = serde_json of a `Request` or a `Response` (a
//! tagged enum: the tag is the message kind), one response per request, in order, on each
//! connection. A length over `FRAME_BYTES_MAX` or a payload that does not decode closes the
//! connection with a logged reason; nothing read from a socket is trusted further than that.
//! Invariant: message kinds are only ever added, so a newer node can still talk to an older
//! one about what both know.
//! Runs on: the controller thread (tokio).

use super::types::{Applied, NodeId, Proposal, Strata};
use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use std::io;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The largest frame either side accepts (the controller log's entry limit).
pub const FRAME_BYTES_MAX: usize = super::log_file::FRAME_BYTES_MAX;

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Request {
    AppendEntries(AppendEntriesRequest<Strata>),
    Vote(VoteRequest<NodeId>),
    InstallSnapshot(InstallSnapshotRequest<Strata>),
    /// A metadata change a broker decided, for the leader to commit. `forwarded` is set by a
    /// controller that passed it on, so it is not passed on again.
    Propose {
        proposal: Proposal,
        forwarded: bool,
    },
    /// A broker is alive (every `broker.heartbeat.interval.ms`), sent to the leader.
    Heartbeat {
        node: i32,
        incarnation: [u8; 16],
    },
    /// Which cluster the asked node is in, and the data directory it knows `node` by: a
    /// starting voter asks before it votes (`quorum::check_identity`).
    Identify {
        node: i32,
    },
    /// Controlled shutdown (KIP-631's `wantShutDown` heartbeat): the broker is stopping; the
    /// leader stops counting its heartbeats and fences it, moving its leaderships away,
    /// before it goes.
    ControlledShutdown {
        node: i32,
        incarnation: [u8; 16],
    },
    /// The quorum's state, as its leader knows it (DescribeQuorum).
    DescribeQuorum,
    /// A broker-only node asks to be a Raft learner (sent to every voter in turn; the leader
    /// adds it, the others answer that they do not lead), reachable at `address`.
    AddLearner {
        node: NodeId,
        address: String,
    },
    /// The first message on a SASL controller listener (`controller::security`): a PLAIN
    /// login as this node's `sasl.jaas.config` username.
    Authenticate {
        mechanism: String,
        user: String,
        password: crate::config::security::Secret,
    },
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Response {
    AppendEntries(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    InstallSnapshot(
        Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>,
    ),
    Proposed(Result<Committed, ProposeError>),
    /// `false`: this controller is not the leader (the broker asks again after its next
    /// interval, of the leader it then knows).
    Heartbeat(bool),
    /// The cluster id ("" when none yet) and the directory id registered for the node asked
    /// about, if any.
    Identity {
        cluster_id: String,
        directory_id: Option<String>,
    },
    /// The log index of the entry that fenced the broker (`None`: it was fenced already).
    ShutDown(Result<Option<u64>, ProposeError>),
    /// `None`: the asked controller is not the leader.
    Quorum(Option<QuorumState>),
    /// Whether the learner was added (or already was a member); the error otherwise.
    LearnerAdded(Result<(), String>),
    /// The login's outcome; after an error the connection closes.
    Authenticated(Result<(), String>),
}

/// The quorum as its leader sees it (KIP-595's DescribeQuorum): log indexes stand for Kafka's
/// offsets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumState {
    pub leader: NodeId,
    pub term: u64,
    /// The committed index (Kafka's high watermark of the metadata log).
    pub committed: Option<u64>,
    pub voters: Vec<ReplicaState>,
    /// Learners (brokers that do not vote).
    pub observers: Vec<ReplicaState>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaState {
    pub node: NodeId,
    /// The last index the leader knows this replica has (its own last index for the leader).
    pub log_end: Option<u64>,
    /// Milliseconds since the leader last heard from it (0 for the leader; `None` unknown).
    pub since_contact_ms: Option<u64>,
}

/// A proposal committed and applied on the leader: at which log index, and with what outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Committed {
    pub index: u64,
    pub applied: Applied,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum ProposeError {
    /// No leader is known, or the one asked is not it any more: try again.
    #[error("no controller leader is known: {0}")]
    NoLeader(String),
    /// The quorum did not commit it in time (it may still commit).
    #[error("the controller quorum did not commit the change in time: {0}")]
    Timeout(String),
    #[error("the controller failed: {0}")]
    Failed(String),
}

/// Reads one frame and decodes it; `Ok(None)` at a clean end of stream. For a node's own
/// connections to a peer it chose (the answers it asked for); a listener reads through
/// `admission`, which bounds what a peer may make it hold.
pub async fn read<T, R>(reader: &mut R) -> io::Result<Option<T>>
where
    T: DeserializeOwned,
    R: tokio::io::AsyncRead + Unpin,
{
    let Some(length) = read_length(reader, FRAME_BYTES_MAX).await? else { return Ok(None) };
    read_payload(reader, length).await.map(Some)
}

/// Reads a frame's length prefix; `Ok(None)` at a clean end of stream; an error for a length
/// over `frame_bytes_max` (nothing allocated for it).
pub async fn read_length<R>(reader: &mut R, frame_bytes_max: usize) -> io::Result<Option<usize>>
where
    R: tokio::io::AsyncRead + Unpin,
{
    let mut header = [0u8; 4];
    match reader.read_exact(&mut header).await {
        Ok(_) => {}
        Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(error) => return Err(error),
    }
    let length = u32::from_le_bytes(header) as usize;
    if length > frame_bytes_max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a {length} byte controller frame is over the {frame_bytes_max} byte limit"),
        ));
    }
    Ok(Some(length))
}

/// Reads a frame's `length` bytes of payload (its length already checked) and decodes it.
pub async fn read_payload<T, R>(reader: &mut R, length: usize) -> io::Result<T>
where
    T: DeserializeOwned,
    R: tokio::io::AsyncRead + Unpin,
{
    let mut payload = vec![0; length];
    reader.read_exact(&mut payload).await?;
    serde_json::from_slice(&payload)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("a controller frame: {e}")))
}

/// Encodes and writes one frame.
pub async fn write<T, W>(writer: &mut W, message: &T) -> io::Result<()>
where
    T: Serialize,
    W: tokio::io::AsyncWrite + Unpin,
{
    let payload = serde_json::to_vec(message).map_err(io::Error::other)?;
    if payload.len() > FRAME_BYTES_MAX {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a {} byte controller message is over the frame limit", payload.len()),
        ));
    }
    let mut frame = Vec::with_capacity(4 + payload.len());
    frame.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    frame.extend_from_slice(&payload);
    writer.write_all(&frame).await?;
    writer.flush().await
}
