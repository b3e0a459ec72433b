//! Accepting Kafka connections on one shard: every shard binds each client listener's port
//! (SO_REUSEPORT) and serves the connections it accepts as tasks of its own, within the
//! broker's connection limits (`limits`) and the shard's request budget (`budget`). An SSL
//! listener's connections start with a TLS handshake (`tls`), in their own task.

use super::budget::RequestBudget;
use super::connection::{self, Connection, ConnectionTimeouts, ListenerInfo, Peer};
use super::limits::{ConnectionLimits, ConnectionSlot, Refused};
use crate::node::Node;
use crate::stats::Refusal;
use shard::io::Storage;
use shard::runtime::net::TcpListener;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// How often a full broker looks again for a free connection slot.
pub const CONNECTION_SLOT_POLL_MS: u64 = 10;

/// What every connection a shard accepts shares.
#[derive(Clone)]
pub struct Admission {
    pub limits: Arc<ConnectionLimits>,
    pub budget: Rc<RequestBudget>,
    pub timeouts: ConnectionTimeouts,
}

/// Accepts connections forever (the caller races this against shutdown).
pub async fn accept_loop<S: Storage>(
    node: Rc<Node<S>>,
    listener: &TcpListener,
    info: Rc<ListenerInfo>,
    admission: Admission,
    first_connection_id: u64,
) {
    let mut next_connection_id = first_connection_id;
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
        let Some(slot) = wait_for_slot(&node, &admission.limits, address).await else {
            continue; // closed: its address has too many
        };
        next_connection_id += 1;
        let connection = Connection {
            node: node.clone(),
            budget: admission.budget.clone(),
            timeouts: admission.timeouts,
            peer: Peer { connection_id: next_connection_id, address },
            listener: info.clone(),
            slot,
        };
        shard::runtime::spawn(connection::serve(connection, stream)).detach();
    }
}

/// A slot for the connection from `address`: at once, or once another connection closes while
/// the broker is full (this shard accepts nothing meanwhile); `None` when its address already
/// has `max.connections.per.ip` open.
async fn wait_for_slot<S: Storage>(
    node: &Node<S>,
    limits: &Arc<ConnectionLimits>,
    address: std::net::SocketAddr,
) -> Option<ConnectionSlot> {
    let mut waiting = false;
    loop {
        match limits.admit(address.ip()) {
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
