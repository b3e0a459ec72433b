//! The operator CLI against the real binary: topic create/list/describe/alter-config/delete,
//! produce from stdin, consume to stdout (the README quick start).

mod common;

use common::Broker;
use std::io::Write;
use std::process::{Command, Stdio};

fn strata(args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run strata");
    if let Some(input) = stdin {
        child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("write stdin");
    }
    drop(child.stdin.take());
    let output = child.wait_with_output().expect("wait");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn quick_start_commands_work_against_a_running_broker() {
    let broker = Broker::start("cli", &[]);
    let b = broker.bootstrap.as_str();
    let (ok, out, err) = strata(
        &["topic", "create", "demo", "-p", "4", "-c", "retention.ms=86400000", "-b", b],
        None,
    );
    assert!(ok, "create: {err}");
    assert!(out.contains("created topic demo with 4 partitions"), "{out}");
    let (ok, _, err) = strata(&["topic", "create", "demo", "-b", b], None);
    assert!(!ok && err.contains("TOPIC_ALREADY_EXISTS"), "a second create fails clearly: {err}");
    let (ok, _, err) = strata(&["topic", "create", "bad/name", "-b", b], None);
    assert!(!ok && err.contains("INVALID_TOPIC_EXCEPTION"), "{err}");

    let (ok, out, _) = strata(&["topic", "list", "-b", b], None);
    assert!(
        ok && out.lines().any(|line| line.starts_with("demo") && line.trim_end().ends_with('4')),
        "{out}"
    );

    let input: String = (0..100).map(|i| format!("key{i}\tvalue {i}\n")).collect();
    let (ok, _, err) = strata(&["produce", "demo", "-k", "\t", "-b", b], Some(&input));
    assert!(ok && err.contains("produced 100 records"), "{err}");

    let (ok, out, err) = strata(&["consume", "demo", "-e", "--print-keys", "-b", b], None);
    assert!(ok, "{err}");
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort_unstable();
    let mut expected: Vec<String> = (0..100).map(|i| format!("key{i}\tvalue {i}")).collect();
    expected.sort_unstable();
    assert_eq!(lines, expected);

    // Keys always land on the same partition (murmur2, as the Java client).
    let (_, by_partition, _) =
        strata(&["consume", "demo", "-e", "--print-keys", "--print-offsets", "-b", b], None);
    let partition_of_key7: Vec<&str> = by_partition
        .lines()
        .filter(|line| line.contains("\tkey7\t"))
        .map(|line| line.split(':').next().unwrap_or_default())
        .collect();
    assert_eq!(partition_of_key7.len(), 1);

    let (ok, _, err) =
        strata(&["topic", "alter-config", "demo", "--set", "retention.ms=3600000", "-b", b], None);
    assert!(ok, "{err}");
    let (ok, out, _) = strata(&["topic", "describe", "demo", "-b", b], None);
    assert!(ok && out.contains("retention.ms=3600000 (override)"), "{out}");
    let high_watermarks: i64 = out
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields.len() == 4 && fields[0].parse::<i32>().is_ok())
                .then(|| fields[3].parse::<i64>().unwrap_or(0))
        })
        .sum();
    assert_eq!(high_watermarks, 100, "describe shows every partition's offsets: {out}");
    let (ok, _, err) =
        strata(&["topic", "alter-config", "demo", "--set", "retention.ms=soon", "-b", b], None);
    assert!(!ok && err.contains("INVALID_CONFIG"), "{err}");

    let (ok, _, err) = strata(&["topic", "delete", "demo", "-b", b], None);
    assert!(ok, "{err}");
    let (_, out, _) = strata(&["topic", "list", "-b", b], None);
    assert!(!out.contains("demo"), "{out}");
}

#[test]
fn a_second_broker_on_the_same_data_directory_exits_with_a_clear_error() {
    let first = Broker::start("locked", &[]);
    let output = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["serve", "--data-dir"])
        .arg(&first.data_dir)
        .args(["--listen", &format!("127.0.0.1:{}", common::free_port())])
        .args(["--admin-listen", &format!("127.0.0.1:{}", common::free_port())])
        .output()
        .expect("run a second strata");
    assert!(!output.status.success(), "the second broker must not start");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("is in use by another strata process"), "{stderr}");
    drop(first);
}
