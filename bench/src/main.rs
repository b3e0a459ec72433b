//! `strata-bench`: strata's load generator.
//!
//! Modes so far: `storage`, which drives one partition log of the storage engine directly
//! (no network) with direct I/O, to measure append throughput and latency against the device.
//! The Kafka-protocol modes (`produce`, `consume`, `e2e`) arrive with the broker.
//!
//! Runs on: one pinned glommio executor (shard 0); writers are tasks on it, as they would be on a
//! broker shard.

mod kafka;
mod load;
mod storage;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "strata-bench", version, about = "Load generator for strata")]
struct Cli {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Subcommand)]
enum Mode {
    /// Append to one partition log of the storage engine (direct I/O, no network).
    Storage(storage::StorageArgs),
    /// Produce to a Kafka-compatible broker.
    Produce(load::LoadArgs),
    /// Consume from a Kafka-compatible broker.
    Consume(load::LoadArgs),
    /// Produce and consume at once; latency from scheduled send to receipt.
    E2e(load::LoadArgs),
}

fn main() {
    let cli = Cli::parse();
    let outcome = match cli.mode {
        Mode::Storage(args) => storage::run(args),
        Mode::Produce(args) => load::run(load::Mode::Produce, args),
        Mode::Consume(args) => load::run(load::Mode::Consume, args),
        Mode::E2e(args) => load::run(load::Mode::E2e, args),
    };
    if let Err(message) = outcome {
        eprintln!("strata-bench: {message}");
        std::process::exit(1);
    }
}
