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
