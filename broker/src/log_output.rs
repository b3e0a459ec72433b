//! The broker's log output: stderr, where a failed write is counted and dropped, never fatal.
//!
//! tracing-subscriber reports a failed write of an event with `eprintln!`, which panics when
//! stderr itself cannot be written; a broker whose log file sat on its full data disk died
//! that way (issue #38: 8,000 partitions filled the disk, and the process exited with nothing
//! in its log). Here a write error is swallowed and counted (`dropped_lines`, the metric
//! `strata_log_lines_dropped_total`), and the subscriber's own error reporting is off.

use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};

static DROPPED_LINES: AtomicU64 = AtomicU64::new(0);

/// Log lines that could not be written (ENOSPC, EIO, a closed pipe) since start.
pub fn dropped_lines() -> u64 {
    DROPPED_LINES.load(Ordering::Relaxed)
}

/// A `MakeWriter` for stderr whose writes never fail.
#[derive(Clone, Copy, Default)]
pub struct LossyStderr;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LossyStderr {
    type Writer = LossyWriter;

    fn make_writer(&'a self) -> Self::Writer {
        LossyWriter
    }
}

/// One event's writer: stderr, with errors counted and dropped.
pub struct LossyWriter;

impl Write for LossyWriter {
    fn write(&mut self, buffer: &[u8]) -> io::Result<usize> {
        // One event is one `write_all` of the formatted line: a failure drops that line.
        if io::stderr().write_all(buffer).is_err() {
            DROPPED_LINES.fetch_add(1, Ordering::Relaxed);
        }
        Ok(buffer.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let _ = io::stderr().flush();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_never_fails_whatever_stderr_does() {
        let mut writer = LossyWriter;
        assert_eq!(writer.write(b"line\n").unwrap(), 5);
        assert!(writer.flush().is_ok());
    }
}
