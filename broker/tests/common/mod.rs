//! Starts the real `strata` binary on free loopback ports for a test.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Broker {
    pub child: Child,
    pub bootstrap: String,
    pub admin: String,
    pub data_dir: PathBuf,
    pub stderr_path: PathBuf,
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

impl Broker {
    pub fn start(name: &str, extra: &[&str]) -> Broker {
        let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        remove_stale(&root, &format!("broker-{name}-"));
        let data_dir = root.join(format!("broker-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&data_dir);
        std::fs::create_dir_all(&data_dir).expect("data dir");
        Self::start_in(data_dir, free_port(), free_port(), extra)
    }

    pub fn start_in(data_dir: PathBuf, port: u16, admin_port: u16, extra: &[&str]) -> Broker {
        Self::start_with_env(data_dir, port, admin_port, extra, &[])
    }

    /// `start_in` with extra environment variables for the broker.
    pub fn start_with_env(
        data_dir: PathBuf,
        port: u16,
        admin_port: u16,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Broker {
        let mut command = Command::new(env!("CARGO_BIN_EXE_strata"));
        command.args(["serve", "--data-dir"]).arg(&data_dir).envs(env.iter().copied());
        Self::spawn(command, data_dir, port, admin_port, extra)
    }

    /// Starts the broker in the working directory `cwd` with `--data-dir relative_data_dir`
    /// (a path relative to `cwd`).
    pub fn start_relative(cwd: PathBuf, relative_data_dir: &str, extra: &[&str]) -> Broker {
        let mut command = Command::new(env!("CARGO_BIN_EXE_strata"));
        command.current_dir(&cwd).args(["serve", "--data-dir", relative_data_dir]);
        Self::spawn(command, cwd.join(relative_data_dir), free_port(), free_port(), extra)
    }

    fn spawn(
        mut command: Command,
        data_dir: PathBuf,
        port: u16,
        admin_port: u16,
        extra: &[&str],
    ) -> Broker {
        let bootstrap = format!("127.0.0.1:{port}");
        let admin = format!("127.0.0.1:{admin_port}");
        let stderr_path = data_dir.with_extension("stderr.log");
        let mut child = command
            .args(["--listen", &bootstrap, "--admin-listen", &admin, "--cores", "2"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn strata");
        let stderr = child.stderr.take().expect("stderr");
        let (sender, receiver) = std::sync::mpsc::channel();
        let log_path = stderr_path.clone();
        std::thread::spawn(move || {
            let mut log = std::fs::File::create(&log_path).ok();
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(log) = log.as_mut() {
                    use std::io::Write;
                    let _ = writeln!(log, "{line}");
                }
                if line.contains("ready") {
                    let _ = sender.send(());
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if receiver.recv_timeout(Duration::from_millis(100)).is_ok() {
                break;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "strata exited early ({status}): {}",
                    std::fs::read_to_string(&stderr_path).unwrap_or_default()
                );
            }
            assert!(Instant::now() < deadline, "strata did not log ready within 30 s");
        }
        Broker { child, bootstrap, admin, data_dir, stderr_path }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// GET on the admin port.
    pub fn http_get(&self, path: &str) -> String {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(&self.admin).expect("admin connect");
        stream.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .expect("write");
        let mut out = String::new();
        let _ = stream.read_to_string(&mut out);
        out.split_once("\r\n\r\n").map(|(_, body)| body.to_string()).unwrap_or_default()
    }
}

/// Removes what earlier test runs left under `root` named `prefix<pid>` (a directory and its
/// `.stderr.log`), for pids no longer running: the data directories stay after a test (a
/// restart test reuses one), so without this every run would leave its own behind.
fn remove_stale(root: &std::path::Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(root) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(prefix) else { continue };
        let pid = rest.split('.').next().unwrap_or_default();
        let Ok(pid) = pid.parse::<u32>() else { continue };
        if pid == std::process::id() || std::path::Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let path = entry.path();
        let _ = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
