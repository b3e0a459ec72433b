//! No module of the workspace imports another in a circle (ARCHITECTURE.md, invariant 9).
//!
//! For every source file of every crate, each `crate::a::b` and `super::x` path it names is
//! resolved to the module it points into. An edge from module A to module B is drawn between the
//! two children of their lowest common ancestor that hold them (a parent and its own child are
//! not an edge: a module may use what it declares, and a child may use its parent's items).
//! Among each module's children the edges must form no cycle. Crates depend on each other
//! through Cargo, which already refuses cycles.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const CRATES: &[&str] = &["wire", "shard", "broker", "bench"];

/// Module path of a source file: `services/groups/offsets.rs` → ["services", "groups", "offsets"].
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> =
        relative.iter().map(|part| part.to_string_lossy().into_owned()).collect();
    let last = parts.pop().expect("a file name");
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") {
        parts.push(stem.to_string());
    }
    parts
}

fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            source_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module paths each `crate::` or `super::` path in `text` names (identifier segments only).
fn referenced(text: &str, here: &[String]) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for (start, _) in text.match_indices("crate::").chain(text.match_indices("super::")) {
        let before = text[..start].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let rest = &text[start..];
        let path: Vec<&str> = rest
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .next()
            .unwrap_or_default()
            .split("::")
            .filter(|segment| !segment.is_empty())
            .collect();
        let mut module: Vec<String> = match path.first() {
            Some(&"crate") => Vec::new(),
            _ => here.to_vec(),
        };
        for segment in &path {
            match *segment {
                "crate" => {}
                "super" => {
                    module.pop();
                }
                other => module.push(other.to_string()),
            }
        }
        found.push(module);
    }
    found
}

/// Finds a cycle among `edges`, if any.
fn cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|n| n == node) {
            return Some(stack[at..].to_vec());
        }
        if done.contains(node) {
            return None;
        }
        stack.push(node.to_string());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, edges, stack, done) {
                return Some(found);
            }
        }
        stack.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    edges.keys().find_map(|node| visit(node, edges, &mut Vec::new(), &mut done))
}

#[test]
fn no_module_imports_another_in_a_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root");
    let mut problems = Vec::new();
    let mut edges_seen = 0;
    for name in CRATES {
        let src = root.join(name).join("src");
        let mut files = Vec::new();
        source_files(&src, &mut files);
        let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(&src, f)).collect();
        // Sibling edges, keyed by the parent module.
        let mut graphs: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
        for file in &files {
            let here = module_of(&src, file);
            let source = std::fs::read_to_string(file).expect("read source");
            // Comments name modules without importing them.
            let text: String = source
                .lines()
                .map(|line| line.split("//").next().unwrap_or_default())
                .collect::<Vec<_>>()
                .join("\n");
            for mut target in referenced(&text, &here) {
                while !target.is_empty() && !modules.contains(&target) {
                    target.pop();
                }
                let common = here.iter().zip(&target).take_while(|(a, b)| a == b).count();
                let (Some(from), Some(to)) = (here.get(common), target.get(common)) else {
                    continue; // the same module, or an ancestor and its descendant
                };
                graphs
                    .entry(here[..common].to_vec())
                    .or_default()
                    .entry(from.clone())
                    .or_default()
                    .insert(to.clone());
                edges_seen += 1;
            }
        }
        for (parent, edges) in &graphs {
            if let Some(circle) = cycle(edges) {
                problems.push(format!("{name}::{}: {}", parent.join("::"), circle.join(" -> ")));
            }
        }
    }
    assert!(edges_seen > 100, "the scan found the imports ({edges_seen} edges)");
    assert!(
        problems.is_empty(),
        "modules importing each other in a circle:\n{}",
        problems.join("\n")
    );
}
