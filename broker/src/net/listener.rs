//! Accepting Kafka connections: every shard binds each client listener's port (SO_REUSEPORT)
//! and accepts within the broker's connection limits (`limits`), which place each connection
//! on the serving shard with the fewest open. A connection placed on another shard is handed
//! to it over the mesh (`Acceptor` is the service that takes it). Each connection is served as
//! a task of its shard, within that shard's request budget (`budget`). An SSL listener's
//! connections start with a TLS handshake (`tls`), in their own task.

use super::budget::RequestBudget;
use super::connection::{self, Connection, ConnectionTimeouts, ListenerInfo, Peer};
use super::limits::{ConnectionLimits, ConnectionSlot, Refused};
use crate::mesh::Service;
use crate::node::Node;
use crate::stats::Refusal;
use futures_util::future::LocalBoxFuture;
use shard::io::Storage;
use shard::runtime::net::{HandedStream, TcpListener, TcpStream};
use shard::runtime::ShardId;
use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// How often a full broker looks again for a free connection slot.
pub const CONNECTION_SLOT_POLL_MS: u64 = 10;

/// What every connection a shard serves shares.
#[derive(Clone)]
pub struct Admission {
    pub limits: Arc<ConnectionLimits>,
    pub budget: Rc<RequestBudget>,
    pub timeouts: ConnectionTimeouts,
}

/// One shard's side of the client listeners: it serves the connections it accepts and those
/// other shards hand it. Registered on the mesh as the service that takes hand-offs.
pub struct Acceptor<S: Storage> {
    node: Rc<Node<S>>,
    /// The client listeners, in configuration order (a hand-off names one by its index).
    listeners: Vec<Rc<ListenerInfo>>,
    admission: Admission,
    /// The last connection id given out, per listener: the shard in the top 16 bits, the
    /// listener in the next 8.
    last_ids: Vec<Cell<u64>>,
}

/// A connection another shard accepted and placed here.
pub struct HandedConnection {
    listener: usize,
    stream: HandedStream,
    address: SocketAddr,
    slot: ConnectionSlot,
}

impl<S: Storage> Acceptor<S> {
    pub fn new(node: Rc<Node<S>>, listeners: Vec<Rc<ListenerInfo>>, admission: Admission) -> Self {
        let shard = u64::from(node.mesh.id().0);
        let last_ids = (0..listeners.len())
            .map(|index| Cell::new(shard << 48 | (index as u64) << 40))
            .collect();
        Acceptor { node, listeners, admission, last_ids }
    }

    /// Serves a connection of listener `index` on this shard.
    fn serve(&self, index: usize, stream: TcpStream, address: SocketAddr, slot: ConnectionSlot) {
        let (Some(info), Some(last_id)) = (self.listeners.get(index), self.last_ids.get(index))
        else {
            tracing::error!(index, %address, "a connection for an unknown listener: closed");
            return;
        };
        last_id.set(last_id.get() + 1);
        let connection = Connection {
            node: self.node.clone(),
            budget: self.admission.budget.clone(),
            timeouts: self.admission.timeouts,
            peer: Peer { connection_id: last_id.get(), address },
            listener: info.clone(),
            slot,
        };
        shard::runtime::spawn(connection::serve(connection, stream)).detach();
    }

    /// Accepts connections on listener `index` forever (the caller races this against
    /// shutdown), serving each here or handing it to the shard its slot names.
    pub async fn accept_loop(self: Rc<Self>, index: usize, listener: &TcpListener) {
        let here = self.node.mesh.id();
        loop {
            let stream = match listener.accept().await {
                Ok(stream) => stream,
                Err(error) => {
                    tracing::warn!(%error, "accept failed");
                    shard::runtime::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            let Ok(address) = stream.peer_addr() else { continue };
            let Some(slot) = wait_for_slot(&self.node, &self.admission.limits, address, here).await
            else {
                continue; // closed: its address has too many
            };
            let target = ShardId(slot.shard() as u16);
            if target == here {
                self.serve(index, stream, address, slot);
                continue;
            }
            let stream = match HandedStream::take(stream) {
                Ok(stream) => stream,
                Err(error) => {
                    tracing::warn!(%error, %address, "could not hand a connection over: closed");
                    continue;
                }
            };
            let handed = HandedConnection { listener: index, stream, address, slot };
            // Not waited for: the other shard starts serving at once, and this one accepts
            // on. A hand-off that fails on the way closes the connection (the client
            // reconnects).
            if let Err(error) = self.node.mesh.start_call::<Self, _>(target, handed).await {
                tracing::warn!(%error, %address, "could not hand a connection over: closed");
            }
        }
    }
}

impl<S: Storage> Service for Acceptor<S> {
    const NAME: &'static str = "connections";
    const IN_PROGRESS_MAX: usize = 64;
}

impl crate::mesh::Ask for HandedConnection {
    type Answer = ();
}

impl<S: Storage> crate::mesh::Answers<HandedConnection> for Acceptor<S> {
    fn answer(self: Rc<Self>, handed: HandedConnection) -> LocalBoxFuture<'static, ()> {
        let HandedConnection { listener, stream, address, slot } = handed;
        self.serve(listener, stream.bind(), address, slot);
        Box::pin(async {})
    }
}

/// A slot for the connection from `address` accepted on shard `here`: at once, or once another
/// connection closes while the broker is full (this shard accepts nothing meanwhile); `None`
/// when its address already has `max.connections.per.ip` open.
async fn wait_for_slot<S: Storage>(
    node: &Node<S>,
    limits: &Arc<ConnectionLimits>,
    address: SocketAddr,
    here: ShardId,
) -> Option<ConnectionSlot> {
    let mut waiting = false;
    loop {
        match limits.admit(address.ip(), usize::from(here.0)) {
            Ok(slot) => return Some(slot),
            Err(Refused::PerIp) => {
                node.stats.refused(Refusal::PerIp);
                tracing::info!(%address, "max.connections.per.ip reached: connection closed");
                return None;
            }
            Err(Refused::Full) => {
                if !waiting {
                    waiting = true;
                    node.stats.refused(Refusal::BrokerLimit);
                    tracing::info!(%address, open = limits.open(), "max.connections reached: waiting");
                }
                shard::runtime::sleep(Duration::from_millis(CONNECTION_SLOT_POLL_MS)).await;
            }
        }
    }
}
