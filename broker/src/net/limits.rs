//! Kafka's connection limits, for the whole broker: `max.connections` (past it an accepted
//! connection is not served until another closes, and its shard accepts no more meanwhile, so
//! the rest wait in the listen backlog, as Kafka's acceptor blocks) and `max.connections.per.ip`
//! (past it a new connection from that address is closed at once, as Kafka closes it with
//! TooManyConnectionsException).
//!
//! Shared by every shard's accept loop (`Arc<Mutex<_>>`), touched only when a connection opens
//! or closes, never per request: one of the few pieces of cross-shard state (ARCHITECTURE.md).
//! References: Kafka `SocketServer.ConnectionQuotas`.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};

/// Why a connection cannot be served now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The broker has `max.connections` open: wait for one to close.
    Full,
    /// This address has `max.connections.per.ip` open: close the new one.
    PerIp,
}

#[derive(Default)]
struct Counts {
    open: usize,
    per_ip: HashMap<IpAddr, usize>,
}

pub struct ConnectionLimits {
    max_connections: usize,
    max_per_ip: usize,
    counts: Mutex<Counts>,
}

/// One open connection's place in the counts; released when dropped.
pub struct ConnectionSlot {
    limits: Arc<ConnectionLimits>,
    ip: IpAddr,
}

impl ConnectionLimits {
    pub fn new(max_connections: usize, max_per_ip: usize) -> Arc<Self> {
        Arc::new(ConnectionLimits { max_connections, max_per_ip, counts: Mutex::default() })
    }

    fn counts(&self) -> MutexGuard<'_, Counts> {
        // A panic while holding the lock leaves plain counts behind; they stay usable.
        self.counts.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn open(&self) -> usize {
        self.counts().open
    }

    /// Counts a connection from `ip`, or says why it cannot be served now.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<ConnectionSlot, Refused> {
        let mut counts = self.counts();
        let from_ip = counts.per_ip.get(&ip).copied().unwrap_or(0);
        if from_ip >= self.max_per_ip {
            return Err(Refused::PerIp);
        }
        if counts.open >= self.max_connections {
            return Err(Refused::Full);
        }
        counts.open += 1;
        counts.per_ip.insert(ip, from_ip + 1);
        Ok(ConnectionSlot { limits: self.clone(), ip })
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut counts = self.limits.counts();
        counts.open = counts.open.saturating_sub(1);
        if let Some(count) = counts.per_ip.get_mut(&self.ip) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.per_ip.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_count_per_address_and_in_total() {
        let limits = ConnectionLimits::new(3, 2);
        let a: IpAddr = [10, 0, 0, 1].into();
        let b: IpAddr = [10, 0, 0, 2].into();
        let first = limits.admit(a).expect("1st from a");
        let second = limits.admit(a).expect("2nd from a");
        assert_eq!(limits.admit(a).err(), Some(Refused::PerIp), "a third from one address");
        let third = limits.admit(b).expect("b");
        assert_eq!(limits.admit(b).err(), Some(Refused::Full), "three open: the broker is full");
        drop(first);
        assert_eq!(limits.open(), 2);
        let again = limits.admit(a).expect("a freed slot is usable again");
        drop((second, third, again));
        assert_eq!(limits.open(), 0);
    }
}
