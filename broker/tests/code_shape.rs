//! The code's shape, checked on its source (beside `module_graph.rs`'s import circles):
//! - every Kafka error code the broker answers with is made in `broker/src/error.rs`
//!   (`error_code` and its helpers), from a typed error: no other file names
//!   kafka-protocol's `ResponseError`, calls `.code()` on one, defines a constant named as a
//!   Kafka error, or writes a non-zero literal as an error code. The CLI (`cli/`) is a client:
//!   it may name `ResponseError`s to read the codes of responses, never call `.code()`;
//! - no product-code function is longer than `FUNCTION_LINES_MAX` lines.
//!
//! Test modules (`#[cfg(test)] mod ...` to the end of a file, `*_tests.rs`) are not product
//! code.

use kafka_protocol::error::ResponseError;
use std::path::{Path, PathBuf};

const CRATES: &[&str] = &["wire", "shard", "broker", "bench"];
/// A function fits on a screen.
const FUNCTION_LINES_MAX: usize = 80;

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

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace").to_path_buf()
}

/// Every product source file of `krate` with its product lines (a test module at the end of
/// the file cut off).
fn product_sources(krate: &str) -> Vec<(PathBuf, Vec<String>)> {
    let src = workspace().join(krate).join("src");
    let mut files = Vec::new();
    source_files(&src, &mut files);
    files.sort();
    files
        .into_iter()
        .filter(|file| {
            let name = file.file_name().map(|n| n.to_string_lossy().into_owned());
            !name.is_some_and(|n| n.ends_with("_tests.rs") || n == "tests.rs")
        })
        .map(|file| {
            let text = std::fs::read_to_string(&file).expect("read source");
            let lines: Vec<String> = text.lines().map(str::to_string).collect();
            let end = lines
                .windows(2)
                .position(|pair| {
                    pair[0].trim() == "#[cfg(test)]" && pair[1].trim_start().starts_with("mod ")
                })
                .unwrap_or(lines.len());
            let product = lines[..end].to_vec();
            (file, product)
        })
        .collect()
}

/// A line without its `//` comment, with string and character literals emptied.
fn code_of(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::new();
    let mut in_string = false;
    let mut index = 0;
    while index < chars.len() {
        let c = chars[index];
        index += 1;
        if in_string {
            if c == '\\' {
                index += 1;
            } else if c == '"' {
                in_string = false;
                out.push('"');
            }
            continue;
        }
        match c {
            '/' if chars.get(index) == Some(&'/') => break,
            '"' => {
                in_string = true;
                out.push('"');
            }
            // A character literal ('x', '\n', '\''), not a lifetime ('a).
            '\'' if chars.get(index) == Some(&'\\') => {
                let close =
                    chars.get(index + 2..).and_then(|rest| rest.iter().position(|&c| c == '\''));
                index = close.map_or(chars.len(), |at| index + at + 3);
                out.push_str("' '");
            }
            '\'' if chars.get(index + 1) == Some(&'\'') => {
                index += 2;
                out.push_str("' '");
            }
            c => out.push(c),
        }
    }
    out
}

/// Kafka's error names as constants would be named (`OFFSET_OUT_OF_RANGE`).
fn kafka_error_names() -> Vec<String> {
    (1..=200)
        .filter(|code| {
            ResponseError::try_from_code(*code)
                .is_some_and(|e| !matches!(e, ResponseError::Unknown(_)))
        })
        .map(broker::error::answered::name)
        .collect()
}

/// Whether `code` writes a non-zero literal as an error code (`error_code: 3`,
/// `error_code = 88`, `partition_error_code == 6`).
fn literal_error_code(code: &str) -> bool {
    let mut rest = code;
    while let Some(at) = rest.find("error_code") {
        let after = rest[at + "error_code".len()..].trim_start();
        let value = ["==", "!=", ":", "="]
            .iter()
            .find_map(|op| after.strip_prefix(op))
            .map(|value| value.trim_start().trim_start_matches('-'));
        if value.is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit() && c != '0')) {
            return true;
        }
        rest = &rest[at + 1..];
    }
    false
}

#[test]
fn kafka_error_codes_are_made_only_in_error_rs() {
    let names = kafka_error_names();
    assert!(names.iter().any(|n| n == "OFFSET_OUT_OF_RANGE"), "names from kafka-protocol");
    let mut found = Vec::new();
    for (file, lines) in product_sources("broker") {
        let relative = file.strip_prefix(workspace()).expect("in workspace").display().to_string();
        if relative == "broker/src/error.rs" {
            continue;
        }
        let client = relative.starts_with("broker/src/cli/");
        for (index, line) in lines.iter().enumerate() {
            let code = code_of(line);
            let place = format!("{relative}:{}: {}", index + 1, line.trim());
            if code.contains("ResponseError") && !client {
                found.push(format!("{place}  (names ResponseError)"));
            }
            if code.contains("ResponseError") && code.contains(".code()") {
                found.push(format!("{place}  (makes a code with .code())"));
            }
            if literal_error_code(&code) {
                found.push(format!("{place}  (a literal error code)"));
            }
            let constant = code.trim_start().trim_start_matches("pub ").strip_prefix("const ");
            if let Some(name) = constant.and_then(|rest| rest.split(':').next()) {
                if names.iter().any(|kafka| kafka == name.trim()) {
                    found.push(format!("{place}  (a constant named as a Kafka error)"));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "Kafka error codes made outside broker/src/error.rs (return a typed error and let \
         error::error_code map it, or read codes with error::answered):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_checks_catch_what_they_look_for() {
    assert!(literal_error_code("response.error_code = 88;"));
    assert!(literal_error_code("p.partition_error_code == 6"));
    assert!(literal_error_code("error_code: -1,"));
    assert!(!literal_error_code("response.error_code = NONE;"));
    assert!(!literal_error_code("error_code: 0,"));
    assert_eq!(code_of(r#"let x = "ResponseError"; // ResponseError"#), r#"let x = ""; "#);
    assert_eq!(code_of(r#"'"' => "{", '\'' => '}', 'a"#), r#"' ' => "", ' ' => ' ', 'a"#);
    let lengths = function_lengths(
        &["fn short() {", "    1", "}", "fn long() {", "    if x {", "    }", "}"]
            .map(str::to_string),
    );
    assert_eq!(lengths, [("short".to_string(), 1, 3), ("long".to_string(), 4, 4)]);
}

/// (name, first line, length in lines) of every function in `lines` with a body.
fn function_lengths(lines: &[String]) -> Vec<(String, usize, usize)> {
    let mut functions = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        let code = code_of(line);
        let Some(name) = function_name(&code) else { continue };
        let mut depth = 0i32;
        let mut opened = false;
        for (offset, next) in lines[start..].iter().enumerate() {
            let code = code_of(next);
            if !opened && depth == 0 && code.contains(';') && !code.contains('{') {
                break;
            }
            for c in code.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if opened && depth <= 0 {
                functions.push((name.clone(), start + 1, offset + 1));
                break;
            }
        }
    }
    functions
}

/// The name of the function `code` declares, if it does.
fn function_name(code: &str) -> Option<String> {
    let mut words = code.split_whitespace().peekable();
    while let Some(word) = words.peek() {
        if word.starts_with("pub") || ["const", "async", "unsafe", "extern"].contains(word) {
            words.next();
        } else {
            break;
        }
    }
    if words.next() != Some("fn") {
        return None;
    }
    let name: String =
        words.next()?.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
    (!name.is_empty()).then_some(name)
}

#[test]
fn no_product_function_is_longer_than_a_screen() {
    let mut long = Vec::new();
    for krate in CRATES {
        for (file, lines) in product_sources(krate) {
            let relative = file.strip_prefix(workspace()).expect("in workspace").display();
            for (name, line, length) in function_lengths(&lines) {
                if length > FUNCTION_LINES_MAX {
                    long.push(format!("{relative}:{line} {name}: {length} lines"));
                }
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {FUNCTION_LINES_MAX} lines (split them by phase: validate, decide, \
         apply, answer):\n{}",
        long.join("\n")
    );
}
