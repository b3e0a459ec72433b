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
        ok && out
            .lines()
            .any(|line| line.split_whitespace().collect::<Vec<_>>() == ["demo", "4", "1"]),
        "TOPIC PARTITIONS REPLICAS: {out}"
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
            (fields.len() == 7 && fields[0].parse::<i32>().is_ok())
                .then(|| fields[3].parse::<i64>().unwrap_or(0))
        })
        .sum();
    assert_eq!(high_watermarks, 100, "describe shows every partition's offsets: {out}");
    let sizes: Vec<i64> = out
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields.len() == 7 && fields[0].parse::<i32>().is_ok())
                .then(|| fields[4].parse::<i64>().unwrap_or(-1))
        })
        .collect();
    assert!(
        sizes.iter().all(|size| *size > 0),
        "every partition that holds records has a size: {out}"
    );
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

/// A relative data directory (the default `./strata-data` is one) works: glommio fails with
/// EBADF on relative paths, so the broker makes them absolute. Produce, restart, consume.
#[test]
fn a_relative_data_directory_works_and_survives_a_restart() {
    let cwd = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("relative-cwd-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cwd);
    std::fs::create_dir_all(&cwd).expect("cwd");
    let broker = Broker::start_relative(cwd.clone(), "./rel-data", &[]);
    let b = broker.bootstrap.clone();
    let (ok, _, err) = strata(&["produce", "rel", "-b", &b], Some("one\ntwo\n"));
    assert!(ok, "{err}");
    assert!(cwd.join("rel-data").join("rel-0").is_dir(), "the partition lives under cwd");
    drop(broker);
    let broker = Broker::start_relative(cwd.clone(), "rel-data", &[]);
    let (ok, out, err) = strata(&["consume", "rel", "-e", "-b", &broker.bootstrap], None);
    assert!(ok, "{err}");
    assert_eq!(out.lines().collect::<Vec<_>>(), ["one", "two"]);
    drop(broker);
    let _ = std::fs::remove_dir_all(&cwd);
}

/// Configuration precedence through the binary: the file sets num.partitions, retention.ms and
/// retention.bytes; the environment overrides num.partitions and retention.bytes; a flag
/// overrides retention.bytes again. An auto-created topic shows the winner of each.
#[test]
fn configuration_comes_from_file_then_environment_then_flags() {
    let root = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("config-precedence-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("dir");
    let file = root.join("strata.toml");
    std::fs::write(
        &file,
        "num.partitions = 2\n[log]\nretention.ms = 3600000\nretention.bytes = 111\n",
    )
    .expect("config");
    let broker = Broker::start_with_env(
        root.join("data"),
        common::free_port(),
        common::free_port(),
        &["--config", file.to_str().expect("utf-8"), "--set", "log.retention.bytes=333"],
        &[("STRATA_NUM_PARTITIONS", "3"), ("STRATA_LOG_RETENTION_BYTES", "222")],
    );
    let (ok, _, stderr) =
        strata(&["produce", "auto-made", "-b", &broker.bootstrap, "--acks", "1"], Some("x\n"));
    assert!(ok, "{stderr}");
    let (ok, out, stderr) =
        strata(&["topic", "describe", "auto-made", "-b", &broker.bootstrap], None);
    assert!(ok, "{stderr}");
    assert!(out.contains("partitions 3"), "environment beats the file: {out}");
    assert!(out.contains("retention.ms=3600000"), "the file beats the default: {out}");
    assert!(out.contains("retention.bytes=333"), "a flag beats the environment: {out}");
    let log = broker.log();
    assert!(log.contains("strata starting") && log.contains("config_file="), "{log}");
    assert!(log.contains("num.partitions=3 (environment STRATA_NUM_PARTITIONS)"), "{log}");
}

/// Each kind of invalid setting stops `strata serve` with the key, its source and the range.
#[test]
fn invalid_configuration_is_rejected_naming_the_key() {
    let root = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("config-invalid-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("dir");
    let run = |file_text: Option<&str>, env: &[(&str, &str)], flags: &[&str]| -> String {
        let mut command = Command::new(env!("CARGO_BIN_EXE_strata"));
        command.arg("serve").args(["--data-dir"]).arg(root.join("data"));
        command.args(["--listen", &format!("127.0.0.1:{}", common::free_port())]);
        if let Some(text) = file_text {
            let file = root.join("bad.toml");
            std::fs::write(&file, text).expect("write");
            command.arg("--config").arg(file);
        }
        let output = command.args(flags).envs(env.iter().copied()).output().expect("run");
        assert!(!output.status.success(), "must not start");
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let unknown = run(Some("num.partition = 3\n"), &[], &[]);
    assert!(
        unknown.contains("unknown key \"num.partition\"") && unknown.contains("bad.toml"),
        "{unknown}"
    );
    let range = run(Some("num.partitions = 0\n"), &[], &[]);
    assert!(
        range.contains("invalid num.partitions = \"0\"") && range.contains("1..=100000"),
        "{range}"
    );
    let syntax = run(Some("num.partitions = = 3\n"), &[], &[]);
    assert!(syntax.contains("bad.toml"), "{syntax}");
    let env = run(None, &[("STRATA_LOG_LEVEL", "loud")], &[]);
    assert!(
        env.contains("invalid log.level = \"loud\" (from environment STRATA_LOG_LEVEL)"),
        "{env}"
    );
    let flag = run(None, &[], &["--auto-create-topics", "maybe"]);
    assert!(
        flag.contains("invalid auto.create.topics.enable") && flag.contains("--auto-create-topics"),
        "{flag}"
    );
    let address = run(None, &[], &["--set", "admin.listener=nowhere"]);
    assert!(
        address.contains("invalid admin.listener") && address.contains("HOST:PORT"),
        "{address}"
    );
}

/// `strata doctor` passes on this host, and fails naming the fix when the locked-memory limit
/// is too low (set for the child with the shell's `ulimit -l`).
#[test]
fn doctor_passes_here_and_names_the_fix_for_a_low_memlock_limit() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("doctor-{}", std::process::id()));
    let binary = env!("CARGO_BIN_EXE_strata");
    let run = |memlock_kib: Option<u32>| {
        let limit = memlock_kib.map_or(String::new(), |kib| format!("ulimit -l {kib}; "));
        let output = Command::new("sh")
            .arg("-c")
            .arg(format!("{limit}exec \"$0\" doctor --data-dir \"$1\""))
            .arg(binary)
            .arg(&dir)
            .output()
            .expect("run doctor");
        let text = String::from_utf8_lossy(&output.stdout).into_owned()
            + &String::from_utf8_lossy(&output.stderr);
        (output.status.success(), text)
    };
    let (passed, text) = run(None);
    assert!(passed, "doctor should pass on this machine:\n{text}");
    for check in
        ["io_uring", "memlock", "data dir", "open files", "cpus", "huge pages", "clock", "shards"]
    {
        assert!(text.contains(check), "reports {check}:\n{text}");
    }
    // The default listener (0.0.0.0:9092, PLAINTEXT) is open to every host: a warning.
    assert!(
        text.contains("warn  listeners") && text.contains("no authentication"),
        "warns about the open listener:\n{text}"
    );
    assert!(text.contains("strata can run here") && !text.contains("FAIL"), "{text}");
    let (passed, text) = run(Some(64));
    assert!(!passed, "a 64 KiB memlock limit must fail:\n{text}");
    assert!(text.contains("FAIL  memlock"), "{text}");
    assert!(
        text.contains("LimitMEMLOCK=infinity") && text.contains("ulimit -l unlimited"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
