//! Taking an encoded message apart into its frames and putting frames back
//! together, so a test can build bytes our encoder refuses to write.

/// The 8-byte envelope header and the frames (type, payload) of an encoded
/// message, `END` left out.
pub fn split(bytes: &[u8]) -> (Vec<u8>, Vec<(u8, Vec<u8>)>) {
    let (header, mut rest) = bytes.split_at(8);
    let mut frames = Vec::new();
    while !rest.is_empty() {
        let frame_type = rest[0];
        let len = u32::from_le_bytes(rest[1..5].try_into().expect("a length prefix")) as usize;
        let (payload, tail) = rest[5..].split_at(len);
        if frame_type != 0 {
            frames.push((frame_type, payload.to_vec()));
        }
        rest = tail;
    }
    (header.to_vec(), frames)
}

/// A message of `header` and `frames`, closed with `END`.
pub fn join(header: &[u8], frames: &[(u8, Vec<u8>)]) -> Vec<u8> {
    let mut out = header.to_vec();
    for (frame_type, payload) in frames.iter().chain([&(0, Vec::new())]) {
        out.push(*frame_type);
        out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        out.extend_from_slice(payload);
    }
    out
}

/// A `str` field: its `u32` length, then its bytes.
pub fn str_field(s: &str) -> Vec<u8> {
    let mut out = (s.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(s.as_bytes());
    out
}
