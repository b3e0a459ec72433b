//! Runs the real `strata-bench storage` binary on small volumes and checks its JSON summary for
//! sanity (what it counts, not how fast it was).

use std::process::Command;

fn run(name: &str, args: &[&str]) -> serde_json::Value {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("bench-{name}-{}", std::process::id()));
    let output = Command::new(env!("CARGO_BIN_EXE_strata-bench"))
        .args(["storage", "--dir", dir.to_str().expect("utf-8 path"), "--json"])
        .args(args)
        .output()
        .expect("strata-bench runs");
    assert!(
        output.status.success(),
        "strata-bench failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).expect("utf-8");
    serde_json::from_str(stdout.trim()).expect("one JSON object")
}

#[test]
fn storage_mode_reports_consistent_counts_for_flush_never() {
    let report = run("never", &["--batch-bytes", "65536", "--total-bytes", "8388608"]);
    let batches = report["batches"].as_u64().expect("batches");
    let batch_bytes = report["batch_bytes"].as_u64().expect("batch_bytes");
    assert_eq!(report["flush"], "never");
    assert!(batch_bytes <= 65536 && batch_bytes > 60_000);
    assert_eq!(report["bytes"].as_u64(), Some(batches * batch_bytes));
    assert!(batches >= 8388608 / 65536);
    assert!(report["mib_per_second"].as_f64().expect("rate") > 0.0);
    assert_eq!(report["fdatasyncs"].as_u64(), Some(1), "only the final sync under flush never");
}

#[test]
fn storage_mode_with_flush_always_group_commits_concurrent_writers() {
    let report = run(
        "always",
        &[
            "--batch-bytes",
            "16384",
            "--total-bytes",
            "4194304",
            "--flush",
            "always",
            "--writers",
            "8",
        ],
    );
    let batches = report["batches"].as_u64().expect("batches");
    let syncs = report["fdatasyncs"].as_u64().expect("fdatasyncs");
    assert_eq!(report["writers"].as_u64(), Some(8));
    assert!(syncs >= 1 && syncs < batches, "{syncs} syncs for {batches} batches");
    let latency = &report["append_latency_us"];
    assert!(latency["p50"].as_u64() <= latency["p99"].as_u64());
    assert!(latency["p99"].as_u64() <= latency["max"].as_u64());
}
