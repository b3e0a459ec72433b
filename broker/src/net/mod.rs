//! The Kafka listener side: accepting connections (`listener`) and serving each one
//! (`connection`): frames in, requests decoded, handlers called through the API registry,
//! responses out in request order.
//! Runs on: every shard (each accepts on the same port with SO_REUSEPORT).

pub mod connection;
pub mod listener;
