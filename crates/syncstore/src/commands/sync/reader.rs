//! The bounded reader of a JSON-lines request: line by line from any
//! `BufRead`, never holding more than the request limit in text plus one
//! line of at most the line limit.
//!
//! A line longer than `max_line_bytes` is refused as soon as its first
//! `max_line_bytes + 1` bytes are seen, and a request longer than
//! `max_request_bytes` as soon as the line that crosses it is read — in
//! both cases before anything more is buffered. The engine's parser then
//! decodes one line at a time from the text, so what the command holds is a
//! bounded multiple of the request limit whatever the input claims or
//! streams.

use std::io::BufRead;

use crate::error::{CliCode, CliError};

/// Default `--max-request-bytes`: 64 MiB.
pub const DEFAULT_MAX_REQUEST_BYTES: u64 = 64 * 1024 * 1024;

/// Default `--max-line-bytes`: 16 MiB (one frame; a `PUSH_COMMIT` carries
/// its operations on its line).
pub const DEFAULT_MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// The limits of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLimits {
    /// The whole request, line terminators included.
    pub max_request_bytes: u64,
    /// One line, without its `\n`.
    pub max_line_bytes: usize,
}

impl Default for RequestLimits {
    fn default() -> Self {
        Self {
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
        }
    }
}

/// Reads a request from `source` under `limits`.
#[derive(Debug)]
pub struct RequestReader<R> {
    source: R,
    limits: RequestLimits,
    line: Vec<u8>,
    peak_line: usize,
}

impl<R: BufRead> RequestReader<R> {
    /// A reader of `source`.
    pub fn new(source: R, limits: RequestLimits) -> Self {
        Self {
            source,
            limits,
            line: Vec::new(),
            peak_line: 0,
        }
    }

    /// The whole request as text (each line followed by `\n`).
    /// `sync.cli.request_too_large` (`limit` = `line` or `request`,
    /// `max_bytes`, `line`: 1-based number) when a limit is crossed;
    /// `sync.cli.io` when the source fails or a line is not UTF-8.
    pub fn read_all(&mut self) -> Result<String, CliError> {
        let mut text = String::new();
        let mut number = 0usize;
        while self.next_line(number + 1)? {
            number += 1;
            let total = (text.len() + self.line.len() + 1) as u64;
            if total > self.limits.max_request_bytes {
                return Err(too_large("request", self.limits.max_request_bytes, number));
            }
            let line = std::str::from_utf8(&self.line).map_err(|_| {
                CliError::new(CliCode::Io)
                    .detail("reason", "not_utf8")
                    .detail("line", number)
            })?;
            text.push_str(line);
            text.push('\n');
        }
        Ok(text)
    }

    /// The longest line held so far, in bytes (never above the line limit).
    #[cfg(test)]
    fn peak_line(&self) -> usize {
        self.peak_line
    }

    /// Reads the next line into `self.line` (without `\n`); false at the
    /// end of the input with nothing read.
    fn next_line(&mut self, number: usize) -> Result<bool, CliError> {
        self.line.clear();
        let mut seen = false;
        loop {
            let available = self
                .source
                .fill_buf()
                .map_err(|error| CliError::new(CliCode::Io).detail("reason", error.kind()))?;
            if available.is_empty() {
                return Ok(seen);
            }
            seen = true;
            let newline = available.iter().position(|&b| b == b'\n');
            let content = newline.unwrap_or(available.len());
            let max = self.limits.max_line_bytes;
            if self.line.len() + content > max {
                return Err(too_large("line", max as u64, number));
            }
            grow_within(&mut self.line, content, max);
            self.line.extend_from_slice(&available[..content]);
            self.peak_line = self.peak_line.max(self.line.len());
            let consumed = newline.map_or(content, |at| at + 1);
            self.source.consume(consumed);
            if newline.is_some() {
                return Ok(true);
            }
        }
    }
}

/// Makes room for `more` bytes, doubling but never past `max` (the caller
/// checked `len + more <= max`), so a line's buffer stays within the limit.
fn grow_within(line: &mut Vec<u8>, more: usize, max: usize) {
    let needed = line.len() + more;
    if line.capacity() < needed {
        let target = needed.max(line.capacity() * 2).min(max);
        line.reserve_exact(target - line.len());
    }
}

fn too_large(limit: &str, max_bytes: u64, line: usize) -> CliError {
    CliError::new(CliCode::RequestTooLarge)
        .detail("limit", limit)
        .detail("max_bytes", max_bytes)
        .detail("line", line)
}

#[cfg(test)]
mod tests {
    use std::io::{BufReader, Read};

    use super::*;

    /// Counts the bytes pulled from the inner reader.
    struct Counting<R> {
        inner: R,
        pulled: u64,
    }

    impl<R: Read> Read for Counting<R> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.inner.read(buf)?;
            self.pulled += n as u64;
            Ok(n)
        }
    }

    fn limits(request: u64, line: usize) -> RequestLimits {
        RequestLimits {
            max_request_bytes: request,
            max_line_bytes: line,
        }
    }

    #[test]
    fn an_endless_line_is_refused_holding_at_most_the_line_limit() {
        let max_line = 100_000;
        let source = Counting {
            inner: std::io::repeat(b'x'),
            pulled: 0,
        };
        let mut reader = RequestReader::new(
            BufReader::with_capacity(8192, source),
            limits(u64::MAX, max_line),
        );
        let error = reader.read_all().unwrap_err();
        assert_eq!(error.code(), "sync.cli.request_too_large");
        assert_eq!(
            error.details().get("limit").map(String::as_str),
            Some("line")
        );
        assert_eq!(error.details().get("line").map(String::as_str), Some("1"));
        assert!(reader.peak_line() <= max_line, "{}", reader.peak_line());
        assert!(
            reader.line.capacity() <= max_line,
            "the line buffer grew to {}",
            reader.line.capacity()
        );
        let pulled = reader.source.get_ref().pulled;
        assert!(
            pulled <= (max_line + 8192) as u64,
            "read {pulled} bytes for a {max_line}-byte line limit"
        );
    }

    #[test]
    fn endless_short_lines_stop_at_the_request_limit() {
        let lines = std::io::Cursor::new(b"{}\n".repeat(10_000));
        let mut reader = RequestReader::new(lines, limits(3_000, 10));
        let error = reader.read_all().unwrap_err();
        assert_eq!(
            error.details().get("limit").map(String::as_str),
            Some("request")
        );
        assert_eq!(
            error.details().get("line").map(String::as_str),
            Some("1001")
        );
    }

    #[test]
    fn a_request_within_the_limits_is_read_whole() {
        let input = "{\"a\":1}\r\n\n{\"b\":2}";
        // Lines of 8 (`\r` counts), 0 and 7 bytes, each with its `\n`: 18.
        let mut reader = RequestReader::new(input.as_bytes(), limits(18, 8));
        assert_eq!(reader.read_all().unwrap(), "{\"a\":1}\r\n\n{\"b\":2}\n");
        // One byte less of either limit refuses it.
        let short = RequestReader::new(input.as_bytes(), limits(17, 8)).read_all();
        assert_eq!(
            short
                .unwrap_err()
                .details()
                .get("limit")
                .map(String::as_str),
            Some("request")
        );
        let narrow = RequestReader::new(input.as_bytes(), limits(18, 7)).read_all();
        assert_eq!(
            narrow
                .unwrap_err()
                .details()
                .get("limit")
                .map(String::as_str),
            Some("line")
        );
    }

    #[test]
    fn a_line_that_is_not_utf8_is_an_io_error() {
        let mut reader = RequestReader::new(&b"{}\n\xff\n"[..], limits(100, 100));
        let error = reader.read_all().unwrap_err();
        assert_eq!(error.code(), "sync.cli.io");
        assert_eq!(error.details().get("line").map(String::as_str), Some("2"));
    }
}
