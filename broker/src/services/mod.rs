//! The owner-side services of one shard, one per domain, each with its own message type and
//! its own state (DESIGN.md §5, "services, not one router"):
//! - `partitions`: the partition logs this shard owns (append, read, list offsets, delete
//!   records, producer state, sizes), and `partitions::waits`, fetch long-polls;
//! - `fetch_sessions`: the incremental fetch sessions (KIP-227) of this shard's connections;
//! - `metadata`: applying metadata images on every shard, and on shard 0 deciding, persisting
//!   and publishing changes;
//! - `groups`: the consumer-group coordinator of the groups whose `__consumer_offsets`
//!   partition this shard owns;
//! - `producer_ids`: InitProducerId's allocator (shard 0);
//! - `transactions`: the transaction coordinator of the transactional ids whose
//!   `__transaction_state` partition this shard leads (KIP-98);
//! - `shares`: the share partitions (KIP-932) of the partitions this shard leads: which
//!   records each share group has in flight, acquisition locks and acknowledgements;
//! - `share_sessions`: the share sessions (KIP-932) of this shard's connections;
//! - `share_state`: the share coordinator, the durable delivery state of share partitions in
//!   the `__share_group_state` partitions this shard leads;
//! - `replication`: the follower side of replication, one peer stream per leader broker;
//! - `stats`: this shard's counters for `/metrics`.
//!
//! Services depend on each other only downwards (metadata and groups use the local partition
//! service; stats reads the others), never on the handlers or the connection layer.

pub mod fetch_sessions;
pub mod groups;
pub mod metadata;
pub mod partitions;
pub mod producer_ids;
pub mod quotas;
pub mod replication;
pub mod share_sessions;
pub mod share_state;
pub mod shares;
pub mod stats;
pub mod transactions;
