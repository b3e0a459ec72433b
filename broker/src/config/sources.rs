//! Where a setting comes from: defaults < the TOML file < `STRATA_*` environment < flags.
//!
//! The file uses Kafka's key names; dotted keys may be written flat (`log.dirs = "..."`) or as
//! TOML tables (`[log] dirs = "..."`), both mean `log.dirs`. Unknown keys and invalid values
//! stop the broker at startup with a message naming the key, where it came from, and the valid
//! range. Environment variables are `STRATA_` + the key upper-cased with dots as underscores
//! (`STRATA_LOG_DIRS`); `STRATA_CONFIG` names the file when `--config` is not given.

use super::keys::{self, Key};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Default,
    File(PathBuf),
    Env(String),
    Flag(String),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Default => write!(f, "default"),
            Source::File(path) => write!(f, "{}", path.display()),
            Source::Env(name) => write!(f, "environment {name}"),
            Source::Flag(flag) => write!(f, "flag {flag}"),
        }
    }
}

/// Every key's value and its source.
#[derive(Debug, Clone)]
pub struct Settings {
    pub values: BTreeMap<&'static str, (String, Source)>,
    /// The file read, if any.
    pub file: Option<PathBuf>,
}

impl Settings {
    pub fn get(&self, name: &str) -> &str {
        self.values.get(name).map(|(value, _)| value.as_str()).unwrap_or_default()
    }

    pub fn source(&self, name: &str) -> Option<&Source> {
        self.values.get(name).map(|(_, source)| source)
    }
}

/// Resolves every key from the defaults, `file`, the environment `env` and the `flags` (key,
/// flag name, value), each later one winning, and checks every value.
pub fn resolve(
    file: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
    flags: &[(&'static str, String, String)],
) -> Result<Settings, String> {
    let mut values: BTreeMap<&'static str, (String, Source)> = keys::KEYS
        .iter()
        .map(|key| (key.name, (key.default.to_string(), Source::Default)))
        .collect();
    if let Some(path) = file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading config file {}: {e}", path.display()))?;
        for (name, value) in parse_toml(&text).map_err(|e| format!("{}: {e}", path.display()))? {
            let key = keys::find(&name).ok_or_else(|| {
                format!(
                    "unknown key {name:?} in {} (every key is listed in deploy/strata.toml)",
                    path.display()
                )
            })?;
            values.insert(key.name, (value, Source::File(path.to_path_buf())));
        }
    }
    for key in keys::KEYS {
        let name = keys::env_name(key.name);
        if let Some(value) = env(&name) {
            values.insert(key.name, (value, Source::Env(name)));
        }
    }
    for (name, flag, value) in flags {
        values.insert(name, (value.clone(), Source::Flag(flag.clone())));
    }
    for key in keys::KEYS {
        let (value, source) = &values[key.name];
        if value.is_empty() && key.default.is_empty() {
            continue; // optional and unset
        }
        check(key, value, source)?;
    }
    Ok(Settings { values, file: file.map(Path::to_path_buf) })
}

fn check(key: &Key, value: &str, source: &Source) -> Result<(), String> {
    keys::check(key, value)
        .map_err(|reason| format!("invalid {} = {value:?} (from {source}): {reason}", key.name))
}

/// The file's settings as (dotted key, value) pairs, tables flattened.
fn parse_toml(text: &str) -> Result<Vec<(String, String)>, String> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| e.to_string())?;
    let mut out = Vec::new();
    flatten("", &table, &mut out)?;
    Ok(out)
}

fn flatten(
    prefix: &str,
    table: &toml::Table,
    out: &mut Vec<(String, String)>,
) -> Result<(), String> {
    for (name, value) in table {
        let key = if prefix.is_empty() { name.clone() } else { format!("{prefix}.{name}") };
        let text = match value {
            toml::Value::Table(inner) => {
                flatten(&key, inner, out)?;
                continue;
            }
            toml::Value::String(text) => text.clone(),
            toml::Value::Integer(number) => number.to_string(),
            toml::Value::Boolean(flag) => flag.to_string(),
            toml::Value::Array(items) => match items.as_slice() {
                [toml::Value::String(one)] => one.clone(),
                _ => return Err(format!("{key}: expected one string value, not a list")),
            },
            other => {
                return Err(format!(
                    "{key}: unsupported value {} (use a string, an integer or a boolean)",
                    other.type_str()
                ))
            }
        };
        out.push((key, text));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn file(text: &str) -> PathBuf {
        let path = std::env::temp_dir().join(format!(
            "strata-config-{}-{}.toml",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::write(&path, text).expect("write");
        path
    }

    #[test]
    fn flags_beat_the_environment_which_beats_the_file_which_beats_defaults() {
        let path = file("num.partitions = 3\n[log]\ndirs = \"/from/file\"\nretention.ms = 1000\n");
        let env = |name: &str| match name {
            "STRATA_NUM_PARTITIONS" => Some("5".to_string()),
            "STRATA_LOG_RETENTION_MS" => Some("2000".to_string()),
            _ => None,
        };
        let flags = [("log.retention.ms", "--set".to_string(), "3000".to_string())];
        let settings = resolve(Some(&path), &env, &flags).expect("valid");
        assert_eq!(settings.get("log.dirs"), "/from/file");
        assert_eq!(settings.get("num.partitions"), "5");
        assert_eq!(settings.get("log.retention.ms"), "3000");
        assert_eq!(settings.get("node.id"), "0");
        assert_eq!(settings.source("log.dirs"), Some(&Source::File(path.clone())));
        assert_eq!(settings.source("node.id"), Some(&Source::Default));
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn unknown_keys_and_each_kind_of_bad_value_are_rejected_naming_the_key() {
        let path = file("num.partition = 3\n");
        let error = resolve(Some(&path), &no_env, &[]).expect_err("unknown key");
        assert!(error.contains("unknown key \"num.partition\""), "{error}");
        let _ = std::fs::remove_file(path);
        for (name, value, expected) in [
            ("num.partitions", "0", "outside the valid range 1..=100000"),
            ("num.partitions", "many", "not an integer"),
            ("auto.create.topics.enable", "yes", "not a boolean"),
            ("listeners", "9092", "not HOST:PORT"),
            ("log.level", "loud", "use error, warn, info, debug or trace"),
            ("log.flush.policy", "sometimes", "use always, never or interval:<ms>"),
            ("num.cores", "0", "use all or a number of cores"),
            ("log.dirs", "/a,/b", "one data directory"),
        ] {
            let env =
                |env_name: &str| (env_name == keys::env_name(name)).then(|| value.to_string());
            let error = resolve(None, &env, &[]).expect_err(name);
            assert!(error.contains(&format!("invalid {name} = {value:?}")), "{error}");
            assert!(error.contains(&keys::env_name(name)), "names the source: {error}");
            assert!(error.contains(expected), "{error}");
        }
    }
}
