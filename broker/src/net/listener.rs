//! Accepting Kafka connections on one shard: every shard binds the same port (SO_REUSEPORT)
//! and serves the connections it accepts as tasks of its own.

use super::connection::{self, Peer};
use crate::node::Node;
use shard::io::Storage;
use shard::runtime::net::TcpListener;
use std::rc::Rc;
use std::time::Duration;

/// Accepts connections forever (the caller races this against shutdown).
pub async fn accept_loop<S: Storage>(node: Rc<Node<S>>, listener: &TcpListener) {
    let mut next_connection_id: u64 = u64::from(node.shard().0) << 48;
    loop {
        match listener.accept().await {
            Ok(stream) => {
                let Ok(address) = stream.peer_addr() else { continue };
                next_connection_id += 1;
                let peer = Peer { connection_id: next_connection_id, address };
                shard::runtime::spawn(connection::serve(node.clone(), stream, peer)).detach();
            }
            Err(error) => {
                tracing::warn!(%error, "accept failed");
                shard::runtime::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}
