//! The seeds of a seeded test. `SEED=<n>` replays that one run. Otherwise every run takes the
//! fixed seeds `0..count` (`SEEDS=<count>`, else the test's own default), the same each time,
//! and one random seed, new each time; it prints them, and a failure names the seed to replay.

/// The seeds `test` runs (see the module notes).
pub fn seeds(test: &str, default_count: u64) -> Vec<u64> {
    if let Some(seed) = std::env::var("SEED").ok().and_then(|seed| seed.parse().ok()) {
        eprintln!("{test}: seed {seed} (SEED)");
        return vec![seed];
    }
    let count =
        std::env::var("SEEDS").ok().and_then(|count| count.parse().ok()).unwrap_or(default_count);
    // Above the fixed range, so it is never one of them.
    let random = count + u64::from(rand::random::<u32>());
    eprintln!(
        "{test}: fixed seeds 0..{count} and the random seed {random} (replay one: SEED=<seed>)"
    );
    (0..count).chain([random]).collect()
}

/// The text of a caught panic (a seeded run's failure), for its report.
#[allow(dead_code)] // not every seeded test catches panics
pub fn panic_message(panic: Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}
