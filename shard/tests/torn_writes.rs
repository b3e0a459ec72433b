//! Torn and corrupted tails on real direct-I/O files: for every byte position inside the last
//! batch, a log cut there recovers to exactly the batches before it, and a flipped byte anywhere
//! in that batch is detected (by CRC32C for the bytes it covers; by length, magic, offset
//! continuity and the leader-epoch history for the 21 header bytes it does not).

mod common;

use common::{batch, options, read_all};
use shard::{FlushPolicy, LogConfig, PartitionLog};
use std::path::Path;

const LEADER_EPOCH: i32 = 3;

async fn open(path: &Path) -> PartitionLog<shard::io::dma::DmaStorage> {
    let storage =
        shard::runtime::open_storage(path.parent().expect("parent")).await.expect("storage");
    let config = LogConfig { flush: FlushPolicy::Always, ..LogConfig::default() };
    PartitionLog::open(storage, path, options(config, 0)).await.expect("open")
}

#[test]
fn every_cut_and_every_flipped_byte_in_the_tail_batch_recovers_to_the_batches_before_it() {
    let root = common::scratch_dir("torn-writes");
    let path = root.join("payments-0");
    let segment = path.join(format!("{:020}.log", 0));
    shard::runtime::run_local(1 << 20, async {
        let log = open(&path).await;
        for i in 0..4 {
            log.append(batch(i, 3, 1500 + 700 * i as usize, 1000), LEADER_EPOCH, 1000)
                .await
                .expect("append");
        }
        let tail = log.append(batch(9, 4, 60, 2000), LEADER_EPOCH, 2000).await.expect("append");
        let all = read_all(&log).await;
        assert_eq!(all.len(), 5);
        drop(log); // no clean shutdown: the next open runs recovery
        let original = std::fs::read(&segment).expect("segment");
        let tail_start: usize = all[..4].iter().map(|b| b.len()).sum();
        let tail_end = tail_start + all[4].len();
        assert_eq!(
            &original[tail_start..tail_end],
            &all[4][..],
            "the file holds the batch as read"
        );

        let expect_prefix = |log: &PartitionLog<_>, recovered: Vec<bytes::Bytes>, what: String| {
            assert_eq!(recovered, all[..4].to_vec(), "{what}: recovered batches");
            assert_eq!(log.log_end_offset(), tail.base_offset, "{what}: log end offset");
        };

        // Control: the whole file recovers all five batches, so the checks below can fail.
        std::fs::write(&segment, &original[..tail_end]).expect("write");
        let log = open(&path).await;
        assert_eq!(read_all(&log).await, all);
        drop(log);

        for cut in tail_start..tail_end {
            std::fs::write(&segment, &original[..cut]).expect("write");
            let log = open(&path).await;
            let recovered = read_all(&log).await;
            expect_prefix(&log, recovered, format!("cut at byte {cut}"));
            drop(log);
        }
        for flip in tail_start..tail_end {
            let mut damaged = original[..tail_end].to_vec();
            damaged[flip] ^= 0xff;
            std::fs::write(&segment, &damaged).expect("write");
            let log = open(&path).await;
            let recovered = read_all(&log).await;
            expect_prefix(
                &log,
                recovered,
                format!("byte {} of the tail batch flipped", flip - tail_start),
            );
            // Recovery must also have cut the file, so appends continue cleanly after the prefix.
            let size = std::fs::metadata(&segment).expect("stat").len() as usize;
            assert_eq!(size, tail_start, "file truncated to the last valid batch");
            drop(log);
        }
    })
    .expect("executor");
    let _ = std::fs::remove_dir_all(&root);
}
