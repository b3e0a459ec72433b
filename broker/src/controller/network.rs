//! openraft's network over the controller protocol: one TCP connection per peer, one request
//! at a time on it (openraft sends to a peer from one task), reconnected after any error.
//!
//! Runs on: the controller thread (tokio).

use super::protocol::{self, Request, Response};
use super::security::ControllerStream;
use super::types::{NodeId, Strata};
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Timeout, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, RPCTypes};
use std::io;
use std::time::Duration;
use tokio::net::TcpStream;

/// A connection to one controller, made on first use and after a failure.
pub struct Peer {
    address: String,
    /// This node: named in the `Identify` that opens each connection, so the listener
    /// (`admission`) knows it is of the cluster.
    me: NodeId,
    stream: Option<ControllerStream>,
}

impl Peer {
    pub fn new(address: String, me: NodeId) -> Peer {
        Peer { address, me, stream: None }
    }

    /// Sends `request` and waits for its response, within `ttl`. Any failure drops the
    /// connection (a late response must never be read as the next request's).
    pub async fn call(&mut self, request: &Request, ttl: Duration) -> io::Result<Response> {
        let exchanged = tokio::time::timeout(ttl, self.exchange(request)).await;
        let result = match exchanged {
            Ok(result) => result,
            Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "no answer in time")),
        };
        if result.is_err() {
            self.stream = None;
        }
        result
    }

    async fn exchange(&mut self, request: &Request) -> io::Result<Response> {
        if self.stream.is_none() {
            // Any connect failure means "unreachable" (a blackholed route answers EINVAL,
            // which would otherwise read as a protocol error), so openraft backs off before
            // trying again instead of retrying in a tight loop.
            let stream = TcpStream::connect(&self.address).await.map_err(|error| {
                io::Error::new(
                    io::ErrorKind::NotConnected,
                    format!("connect to {}: {error}", self.address),
                )
            })?;
            stream.set_nodelay(true)?;
            let mut stream = super::security::secure_client(stream, &self.address).await?;
            let node = i32::try_from(self.me).map_err(io::Error::other)?;
            protocol::write(&mut stream, &Request::Identify { node }).await?;
            match protocol::read::<Response, _>(&mut stream).await? {
                Some(Response::Identity { .. }) => {}
                _ => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{} did not answer this node's Identify", self.address),
                    ))
                }
            }
            self.stream = Some(stream);
        }
        let Some(stream) = self.stream.as_mut() else {
            return Err(io::Error::other("no connection"));
        };
        protocol::write(stream, request).await?;
        match protocol::read(stream).await? {
            Some(response) => Ok(response),
            None => Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the peer closed")),
        }
    }
}

/// Makes a `PeerClient` for each node openraft replicates to, from node `me`.
pub struct Network {
    pub me: NodeId,
}

impl RaftNetworkFactory<Strata> for Network {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> PeerClient {
        PeerClient { target, peer: Peer::new(node.addr.clone(), self.me) }
    }
}

pub struct PeerClient {
    target: NodeId,
    peer: Peer,
}

type RpcError<E = openraft::error::Infallible> = RPCError<NodeId, BasicNode, RaftError<NodeId, E>>;

impl PeerClient {
    async fn send<E: std::error::Error>(
        &mut self,
        request: Request,
        action: RPCTypes,
        option: &RPCOption,
    ) -> Result<Response, RpcError<E>> {
        self.peer.call(&request, option.hard_ttl()).await.map_err(|error| match error.kind() {
            io::ErrorKind::TimedOut => RPCError::Timeout(Timeout {
                action,
                id: 0,
                target: self.target,
                timeout: option.hard_ttl(),
            }),
            io::ErrorKind::InvalidData | io::ErrorKind::InvalidInput => {
                RPCError::Network(NetworkError::new(&error))
            }
            _ => RPCError::Unreachable(Unreachable::new(&error)),
        })
    }

    fn unexpected<E: std::error::Error>(&self, response: Response) -> RpcError<E> {
        let error = io::Error::new(
            io::ErrorKind::InvalidData,
            format!("node {} answered out of turn: {response:?}", self.target),
        );
        RPCError::Network(NetworkError::new(&error))
    }
}

impl RaftNetwork<Strata> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<Strata>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RpcError> {
        match self.send(Request::AppendEntries(rpc), RPCTypes::AppendEntries, &option).await? {
            Response::AppendEntries(result) => {
                result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            other => Err(self.unexpected(other)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<Strata>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RpcError<InstallSnapshotError>> {
        match self.send(Request::InstallSnapshot(rpc), RPCTypes::InstallSnapshot, &option).await? {
            Response::InstallSnapshot(result) => {
                result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            other => Err(self.unexpected(other)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RpcError> {
        match self.send(Request::Vote(rpc), RPCTypes::Vote, &option).await? {
            Response::Vote(result) => {
                result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            other => Err(self.unexpected(other)),
        }
    }
}
