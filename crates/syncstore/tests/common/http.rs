//! Raw HTTP/1.1 answers of `syncstore serve`, read off a socket.

use std::io::BufRead;

/// One HTTP answer.
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

/// Reads a whole `Connection: close` answer, decoding a chunked body.
pub fn read_answer(stream: &mut impl BufRead) -> Answer {
    let mut status_line = String::new();
    stream.read_line(&mut status_line).expect("status line");
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let mut chunked = false;
    loop {
        let mut line = String::new();
        stream.read_line(&mut line).expect("header line");
        if line.trim_end().is_empty() {
            break;
        }
        let lower = line.to_ascii_lowercase();
        if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
            chunked = true;
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            stream.read_line(&mut size).expect("chunk size");
            let size = usize::from_str_radix(size.trim(), 16).expect("hex chunk size");
            let mut chunk = vec![0; size + 2];
            stream.read_exact(&mut chunk).expect("chunk");
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else {
        stream.read_to_end(&mut body).expect("body");
    }
    Answer { status, body }
}
