//! `strata-bench validate`: the CPU cost of the broker's produce-time batch check
//! (`wire::validate::check_batch`, Kafka's log validator), per GB of records, for each codec.
//! No broker and no I/O: one thread checks the same batches over and over, the way one shard
//! (or one offload thread, for compressed batches) does. Records are 1 KiB values of varied
//! text (compressing ~2-4x, as real payloads do, not a run of one byte).

use crate::args::Codec;
use crate::payload::text_value;
use clap::Args;
use wire::validate::{check_batch, TimestampRule};
use wire::{BatchRecord, RecordBatchBuilder, RecordBatchHeader};

#[derive(Args, Debug, Clone)]
pub struct ValidateArgs {
    #[arg(long, value_enum, default_value_t = Codec::None)]
    pub compression: Codec,
    /// Value size of each record.
    #[arg(long, default_value_t = 1024)]
    pub message_size: usize,
    /// Records per batch (librdkafka's default batch.size of 1 MB holds ~1000 of 1 KiB).
    #[arg(long, default_value_t = 1000)]
    pub records: usize,
    /// Inflated bytes to check in all.
    #[arg(long, default_value_t = 2048)]
    pub total_mib: usize,
}

pub fn run(args: ValidateArgs) -> Result<(), String> {
    let values: Vec<Vec<u8>> =
        (0..args.records).map(|index| text_value(args.message_size, index as u64)).collect();
    let mut builder = RecordBatchBuilder::new(1_700_000_000_000);
    for value in &values {
        builder.push(BatchRecord { key: Some(b"key"), value: Some(value), timestamp_delta: 0 });
    }
    let batch = builder.build_compressed(args.compression.wire()).map_err(|e| e.to_string())?;
    let plain = builder.build().len();
    let header = RecordBatchHeader::parse(&batch, 64 << 20).map_err(|e| e.to_string())?;
    let rounds = ((args.total_mib << 20) / plain).max(1);
    check_batch(&header, TimestampRule::ANY, usize::MAX).map_err(|e| e.to_string())?;
    let started = std::time::Instant::now();
    for _ in 0..rounds {
        let checked = check_batch(std::hint::black_box(&header), TimestampRule::ANY, usize::MAX)
            .map_err(|e| e.to_string())?;
        std::hint::black_box(checked);
    }
    let seconds = started.elapsed().as_secs_f64();
    let gigabytes = (plain * rounds) as f64 / 1e9;
    // The limit in the same run: decompressing the same batch into memory (no record parsing),
    // which is what the check cannot beat.
    let body = batch.get(wire::BATCH_HEADER_BYTES..).unwrap_or_default();
    let started = std::time::Instant::now();
    for _ in 0..rounds {
        let inflated = wire::compression::decompress(args.compression.wire(), body)
            .map_err(|e| e.to_string())?;
        std::hint::black_box(inflated);
    }
    let decompress_seconds = started.elapsed().as_secs_f64();
    println!(
        "{}",
        serde_json::json!({
            "mode": "validate",
            "compression": format!("{:?}", args.compression).to_lowercase(),
            "batch_bytes_inflated": plain,
            "batch_bytes_on_wire": batch.len(),
            "batches": rounds,
            "cpu_seconds_per_gb": seconds / gigabytes,
            "gigabytes_per_second": gigabytes / seconds,
            "decompress_cpu_seconds_per_gb": decompress_seconds / gigabytes,
        })
    );
    Ok(())
}
