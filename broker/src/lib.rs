//! The strata broker: Kafka listener, cross-core router, topic metadata, API handlers, admin
//! endpoint, and the operator CLI. The `strata` binary (`main.rs`) is a thin shell over this.
//!
//! Invariant: only `handlers` (through `error::error_code`) produce Kafka error codes.

pub mod admin;
pub mod alloc;
pub mod cli;
pub mod config;
pub mod connection;
pub mod error;
pub mod group;
pub mod handlers;
pub mod metadata;
pub mod producer_ids;
pub mod router;
pub mod server;
pub mod state;
