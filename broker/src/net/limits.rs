//! Kafka's connection limits, for the whole broker: `max.connections` (past it an accepted
//! connection is not served until another closes, and its shard accepts no more meanwhile, so
//! the rest wait in the listen backlog, as Kafka's acceptor blocks) and `max.connections.per.ip`
//! (past it a new connection from that address is closed at once, as Kafka closes it with
//! TooManyConnectionsException).
//!
//! The counts also place each connection: on the serving shard with the fewest open (the
//! accepting shard on a tie), as Kafka's acceptor deals its connections out to its network
//! threads and Seastar balances connections across shards. SO_REUSEPORT alone spreads them by a
//! hash of the address and port, which put a client's producer and consumer connections on one
//! shard in 5 of 8 benchmark runs, leaving the other shard's core to the rest.
//!
//! Shared by every shard's accept loop (`Arc<Mutex<_>>`), touched only when a connection opens
//! or closes, never per request: one of the few pieces of cross-shard state (ARCHITECTURE.md).
//! References: Kafka `SocketServer.ConnectionQuotas`, `Acceptor.assignNewConnection`.

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
    /// Connections placed on each shard.
    per_shard: Vec<usize>,
    /// Shards that serve connections another shard accepted (`serving`).
    serving: Vec<bool>,
}

pub struct ConnectionLimits {
    max_connections: usize,
    max_per_ip: usize,
    counts: Mutex<Counts>,
}

/// One open connection's place in the counts, and the shard that serves it; released when
/// dropped.
pub struct ConnectionSlot {
    limits: Arc<ConnectionLimits>,
    ip: IpAddr,
    shard: usize,
}

impl ConnectionSlot {
    /// The shard that serves the connection.
    pub fn shard(&self) -> usize {
        self.shard
    }
}

impl ConnectionLimits {
    pub fn new(max_connections: usize, max_per_ip: usize, shards: usize) -> Arc<Self> {
        let counts = Counts {
            per_shard: vec![0; shards.max(1)],
            serving: vec![false; shards.max(1)],
            ..Counts::default()
        };
        Arc::new(ConnectionLimits { max_connections, max_per_ip, counts: Mutex::new(counts) })
    }

    /// From now on `shard` also serves connections other shards accept.
    pub fn serving(&self, shard: usize) {
        if let Some(serving) = self.counts().serving.get_mut(shard) {
            *serving = true;
        }
    }

    /// Connections placed on each shard (`/metrics` counts them per shard as they are
    /// served: `strata_connections_open`).
    #[cfg(test)]
    fn per_shard(&self) -> Vec<usize> {
        self.counts().per_shard.clone()
    }

    fn counts(&self) -> MutexGuard<'_, Counts> {
        // A panic while holding the lock leaves plain counts behind; they stay usable.
        self.counts.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn open(&self) -> usize {
        self.counts().open
    }

    /// Counts a connection from `ip` that shard `accepted_on` accepted, and places it (the
    /// slot's `shard`), or says why it cannot be served now.
    pub fn admit(
        self: &Arc<Self>,
        ip: IpAddr,
        accepted_on: usize,
    ) -> Result<ConnectionSlot, Refused> {
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
        let shard = least_loaded(&counts, accepted_on);
        if let Some(placed) = counts.per_shard.get_mut(shard) {
            *placed += 1;
        }
        Ok(ConnectionSlot { limits: self.clone(), ip, shard })
    }
}

/// The serving shard with the fewest connections; `accepted_on` (which may not be serving
/// others' connections yet) unless another has fewer.
fn least_loaded(counts: &Counts, accepted_on: usize) -> usize {
    let load = |shard: usize| counts.per_shard.get(shard).copied().unwrap_or(usize::MAX);
    let mut best = accepted_on;
    for shard in 0..counts.per_shard.len() {
        if counts.serving.get(shard) == Some(&true) && load(shard) < load(best) {
            best = shard;
        }
    }
    best
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut counts = self.limits.counts();
        counts.open = counts.open.saturating_sub(1);
        if let Some(placed) = counts.per_shard.get_mut(self.shard) {
            *placed = placed.saturating_sub(1);
        }
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
        let limits = ConnectionLimits::new(3, 2, 1);
        let a: IpAddr = [10, 0, 0, 1].into();
        let b: IpAddr = [10, 0, 0, 2].into();
        let first = limits.admit(a, 0).expect("1st from a");
        let second = limits.admit(a, 0).expect("2nd from a");
        assert_eq!(limits.admit(a, 0).err(), Some(Refused::PerIp), "a third from one address");
        let third = limits.admit(b, 0).expect("b");
        assert_eq!(limits.admit(b, 0).err(), Some(Refused::Full), "three open: the broker is full");
        drop(first);
        assert_eq!(limits.open(), 2);
        let again = limits.admit(a, 0).expect("a freed slot is usable again");
        drop((second, third, again));
        assert_eq!(limits.open(), 0);
    }

    #[test]
    fn connections_go_to_the_serving_shard_with_the_fewest() {
        let limits = ConnectionLimits::new(100, 100, 3);
        let ip: IpAddr = [10, 0, 0, 1].into();
        // Before the others serve, every shard keeps what it accepts.
        let early: Vec<_> = (0..2).map(|_| limits.admit(ip, 0).expect("admitted")).collect();
        assert!(early.iter().all(|slot| slot.shard() == 0));
        limits.serving(0);
        limits.serving(1);
        // Shard 0 accepts again: shard 1 has fewer and serves; shard 2 does not serve yet.
        let moved = limits.admit(ip, 0).expect("admitted");
        assert_eq!(moved.shard(), 1);
        let next = limits.admit(ip, 0).expect("admitted");
        assert_eq!(next.shard(), 1, "1 connection on shard 1 against 2 on shard 0");
        // A tie keeps the connection where it was accepted.
        let tie = limits.admit(ip, 1).expect("admitted");
        assert_eq!(tie.shard(), 1);
        assert_eq!(limits.per_shard(), vec![2, 3, 0]);
        limits.serving(2);
        assert_eq!(limits.admit(ip, 1).expect("admitted").shard(), 2);
        // A slot dropped frees its shard's place.
        assert_eq!(limits.per_shard(), vec![2, 3, 0], "the dropped slot left shard 2");
        drop(early);
        assert_eq!(limits.per_shard(), vec![0, 3, 0]);
        assert_eq!(limits.admit(ip, 1).expect("admitted").shard(), 0);
        drop((moved, next, tie));
        assert_eq!(limits.per_shard(), vec![0, 0, 0]);
        assert_eq!(limits.open(), 0);
    }
}
