//! `meta.properties`: a data directory's identity, in the file and format Kafka's KRaft nodes
//! write (`version=1`, `cluster.id`, `node.id`, `directory.id`; Java properties, `#`
//! comments). Issue #15: a node refuses to start on a directory of another cluster or node,
//! and a voter whose directory id changed (a wiped disk) must not vote as its old self
//! (KIP-853). `strata serve` reads it after taking the directory's lock (`server`): a
//! directory without one gets one for the cluster it starts (and a lost metadata file is
//! rebuilt under the file's cluster id, by startup and by `strata recover-metadata`); with
//! one, `check` refuses another cluster or node id.

use std::collections::BTreeMap;

pub const FILE: &str = "meta.properties";

/// The identity a data directory records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaProperties {
    pub cluster_id: String,
    pub node_id: i32,
    /// KIP-858/853 directory id: 22 characters of URL-safe base64 (a random UUID).
    pub directory_id: String,
}

impl MetaProperties {
    /// Kafka's layout: a comment line, then the keys in sorted order.
    pub fn render(&self) -> String {
        format!(
            "#\n#Written by strata\ncluster.id={}\ndirectory.id={}\nnode.id={}\nversion=1\n",
            self.cluster_id, self.directory_id, self.node_id
        )
    }

    /// Parses the file's text. Only `version=1` (KRaft) is read; every key must be present.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut keys: BTreeMap<&str, &str> = BTreeMap::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
                continue;
            }
            let (key, value) = line
                .split_once('=')
                .ok_or_else(|| format!("line {}: {line:?} is not key=value", number + 1))?;
            if keys.insert(key.trim(), value.trim()).is_some() {
                return Err(format!("{} is set twice", key.trim()));
            }
        }
        let get = |key: &str| keys.get(key).copied().ok_or_else(|| format!("no {key}"));
        match get("version")? {
            "1" => {}
            other => return Err(format!("version {other}: strata reads version 1 (KRaft)")),
        }
        let node_id = get("node.id")?
            .parse::<i32>()
            .ok()
            .filter(|id| *id >= 0)
            .ok_or_else(|| "node.id is not a node id".to_string())?;
        let cluster_id = get("cluster.id")?.to_string();
        let directory_id = get("directory.id")?.to_string();
        if cluster_id.is_empty() || directory_id.is_empty() {
            return Err("cluster.id and directory.id must not be empty".into());
        }
        Ok(MetaProperties { cluster_id, node_id, directory_id })
    }

    /// Whether this directory may serve as `node_id` of `cluster_id` (Kafka's startup check):
    /// the error says which differs and what to do.
    pub fn check(&self, cluster_id: &str, node_id: i32) -> Result<(), String> {
        if self.cluster_id != cluster_id {
            return Err(format!(
                "{FILE} belongs to cluster {:?}, not {cluster_id:?}: this data directory is \
                 another cluster's; point log.dirs at this cluster's directory",
                self.cluster_id
            ));
        }
        if self.node_id != node_id {
            return Err(format!(
                "{FILE} belongs to node {}, but node.id is {node_id}: a directory serves the \
                 node that created it; set node.id = {} or use another directory",
                self.node_id, self.node_id
            ));
        }
        Ok(())
    }
}

/// The data directory's `meta.properties`, if it has one (`Err` when it cannot be read or
/// parsed: a directory whose identity is unknown is not served).
pub fn read(data_dir: &std::path::Path) -> Result<Option<MetaProperties>, String> {
    let path = data_dir.join(FILE);
    match crate::durable_file::read(&path) {
        Ok(None) => Ok(None),
        Ok(Some(bytes)) => String::from_utf8(bytes)
            .map_err(|_| "not UTF-8".to_string())
            .and_then(|text| MetaProperties::parse(&text))
            .map(Some)
            .map_err(|error| format!("{}: {error}", path.display())),
        Err(error) => Err(format!("{}: {error}", path.display())),
    }
}

/// Writes a new directory's `meta.properties` (durably, before the node serves).
pub fn write(data_dir: &std::path::Path, meta: &MetaProperties) -> Result<(), String> {
    let path = data_dir.join(FILE);
    crate::durable_file::write(&path, meta.render().as_bytes())
        .map_err(|error| format!("{}: {error}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> MetaProperties {
        MetaProperties {
            cluster_id: "MkU3OEVBNTcwNTJENDM2Qk".into(),
            node_id: 2,
            directory_id: "J8aAPcfLQt2bqs1JT_rMgQ".into(),
        }
    }

    #[test]
    fn rendered_text_parses_back_and_kafkas_own_file_parses() {
        assert_eq!(MetaProperties::parse(&identity().render()), Ok(identity()));
        // As Kafka 3.7+ writes it (kafka-storage format).
        let kafka =
            "#\n#Thu Nov 14 10:00:00 UTC 2024\nnode.id=2\ndirectory.id=J8aAPcfLQt2bqs1JT_rMgQ\n\
                     version=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qk\n";
        assert_eq!(MetaProperties::parse(kafka), Ok(identity()));
    }

    #[test]
    fn incomplete_or_foreign_files_are_refused_naming_the_problem() {
        for (text, expected) in [
            ("version=1\nnode.id=1\ncluster.id=c\n", "no directory.id"),
            ("version=0\nbroker.id=1\ncluster.id=c\n", "strata reads version 1"),
            ("version=1\nnode.id=x\ncluster.id=c\ndirectory.id=d\n", "not a node id"),
            ("version=1\nversion=1\n", "set twice"),
            ("version=1\nnode.id\n", "not key=value"),
            ("version=1\nnode.id=1\ncluster.id=\ndirectory.id=d\n", "must not be empty"),
        ] {
            let error = MetaProperties::parse(text).expect_err(text);
            assert!(error.contains(expected), "{text:?}: {error}");
        }
    }

    #[test]
    fn another_clusters_or_nodes_directory_is_refused() {
        let meta = identity();
        meta.check("MkU3OEVBNTcwNTJENDM2Qk", 2).expect("its own");
        assert!(meta.check("other", 2).expect_err("cluster").contains("another cluster's"));
        assert!(meta
            .check("MkU3OEVBNTcwNTJENDM2Qk", 3)
            .expect_err("node")
            .contains("set node.id = 2"));
    }
}
