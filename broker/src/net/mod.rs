//! The Kafka listener side: accepting connections (`listener`) within the broker's connection
//! limits (`limits`), and serving each one (`connection`): frames in, within the shard's
//! request budget (`budget`), requests decoded, handlers called through the API registry,
//! responses out in request order.
//! Runs on: every shard (each accepts on the same port with SO_REUSEPORT, and serves the
//! connections `limits` places on it, its own and those other shards hand over).

pub mod budget;
pub mod connection;
pub mod limits;
pub mod listener;
pub mod tls;
