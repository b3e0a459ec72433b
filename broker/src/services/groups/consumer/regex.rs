//! Regex subscriptions (`subscribed_topic_regex`, KIP-848): a pattern is compiled with a size
//! limit and matched against whole topic names, as Kafka's RE2/J `matcher.matches()`; the
//! group keeps each pattern's topics resolved at a metadata version, and resolves again when
//! topics change.
//! Runs on: the shard coordinating the group (pure).
//! References: KIP-848 "Regular expression"; Kafka `TopicRegexResolver`.

use crate::error::GroupError;

/// Largest compiled pattern accepted (a client's regex must not cost the shard much).
const COMPILED_BYTES_MAX: usize = 1 << 20;

/// The pattern, compiled to match whole names; INVALID_REGULAR_EXPRESSION when it does not
/// compile.
pub fn compile(pattern: &str) -> Result<regex::Regex, GroupError> {
    regex::RegexBuilder::new(&format!("^(?:{pattern})$"))
        .size_limit(COMPILED_BYTES_MAX)
        .build()
        .map_err(|error| GroupError::InvalidRegularExpression(error.to_string()))
}

/// The topic names `pattern` matches (none when it does not compile), in name order.
pub fn resolve(pattern: &str, names: &[String]) -> Vec<String> {
    let Ok(compiled) = compile(pattern) else { return Vec::new() };
    let mut matched: Vec<String> =
        names.iter().filter(|name| compiled.is_match(name)).cloned().collect();
    matched.sort();
    matched
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_matches_whole_names_only() {
        let names: Vec<String> = ["orders", "orders-eu", "my-orders"].map(String::from).into();
        assert_eq!(resolve("orders.*", &names), vec!["orders", "orders-eu"]);
        assert_eq!(resolve("orders", &names), vec!["orders"]);
        assert!(compile("(unclosed").is_err());
    }
}
