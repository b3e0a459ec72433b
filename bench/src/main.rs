//! `strata-bench`: strata's load generator.
//!
//! Modes: `storage` drives one partition log of the storage engine directly (no network) with
//! direct I/O, to measure append throughput and latency against the device; `produce`,
//! `consume` and `e2e` drive any Kafka-compatible broker or cluster (`load`), each partition
//! through its leader (`routing`, `producer`, `consumer`).
//!
//! Runs on: one pinned glommio executor (shard 0); writers are tasks on it, as they would be on a
//! broker shard.

mod args;
mod consumer;
mod kafka;
mod load;
mod payload;
mod producer;
mod routing;
mod shared;
mod storage;
mod validate;

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
    Produce(args::LoadArgs),
    /// Consume from a Kafka-compatible broker.
    Consume(args::LoadArgs),
    /// Produce and consume at once; latency from scheduled send to receipt.
    E2e(args::LoadArgs),
    /// CPU cost of the broker's produce-time batch check, per GB, for one codec.
    Validate(validate::ValidateArgs),
    /// One core's memcpy bandwidth (a machine limit for BENCHMARKS.md).
    Memcpy {
        /// Buffer size in MiB.
        #[arg(long, default_value_t = 256)]
        mib: usize,
        #[arg(long, default_value_t = 8)]
        rounds: usize,
    },
}

/// Copies a buffer `rounds` times and prints GB/s as JSON.
fn memcpy(mib: usize, rounds: usize) -> Result<(), String> {
    let source = vec![7u8; mib << 20];
    let mut target = vec![0u8; mib << 20];
    target.copy_from_slice(&source); // fault the pages in before timing
    let started = std::time::Instant::now();
    for round in 0..rounds {
        target.copy_from_slice(&source);
        std::hint::black_box(&mut target);
        std::hint::black_box(round);
    }
    let seconds = started.elapsed().as_secs_f64();
    let gigabytes_per_second = (mib << 20) as f64 * rounds as f64 / 1e9 / seconds;
    println!(
        "{}",
        serde_json::json!({ "mode": "memcpy", "gigabytes_per_second": gigabytes_per_second })
    );
    Ok(())
}

fn main() {
    let cli = Cli::parse();
    let outcome = match cli.mode {
        Mode::Storage(args) => storage::run(args),
        Mode::Produce(args) => load::run(args::Mode::Produce, args),
        Mode::Consume(args) => load::run(args::Mode::Consume, args),
        Mode::E2e(args) => load::run(args::Mode::E2e, args),
        Mode::Validate(args) => validate::run(args),
        Mode::Memcpy { mib, rounds } => memcpy(mib, rounds),
    };
    if let Err(message) = outcome {
        eprintln!("strata-bench: {message}");
        std::process::exit(1);
    }
}
