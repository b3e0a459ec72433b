//! Record values for the load modes: varied text that compresses like real payloads (2-4x),
//! not a run of one byte.

/// A value of words drawn from a small vocabulary by a fixed generator: compressible like text.
pub fn text_value(size: usize, seed: u64) -> Vec<u8> {
    const WORDS: [&str; 16] = [
        "order",
        "shipped",
        "customer",
        "id",
        "amount",
        "eur",
        "usd",
        "status",
        "pending",
        "warehouse",
        "berlin",
        "lisbon",
        "sku",
        "qty",
        "true",
        "false",
    ];
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let mut value = Vec::with_capacity(size + 16);
    while value.len() < size {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let word = WORDS[(state >> 60) as usize];
        value.extend_from_slice(word.as_bytes());
        value.extend_from_slice(format!("={} ", (state >> 40) & 0xfff).as_bytes());
    }
    value.truncate(size);
    value
}
