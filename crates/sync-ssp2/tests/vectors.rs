//! The published SSP2 golden vectors: every valid case decodes, renders
//! to its `.json` and re-encodes to its `.bin` byte for byte; every
//! `invalid/` case is refused with the code its manifest names.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;
use sync_ssp2::render::{render_request, render_response, render_segment};

fn vectors_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/ssp2-vectors");
    assert!(
        dir.join("README.md").is_file(),
        "the SSP2 golden vectors are missing: expected them at {} (the checkout keeps \
         `shared/` beside the repository)",
        dir.display()
    );
    dir
}

fn read(path: &Path) -> Vec<u8> {
    fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn json_file(path: &Path) -> Value {
    serde_json::from_slice(&read(path))
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn manifest(kind: &str) -> (PathBuf, Value) {
    let dir = vectors_dir().join(kind);
    let manifest = json_file(&dir.join("manifest.json"));
    (dir, manifest)
}

fn entries<'a>(manifest: &'a Value, key: &str) -> &'a Vec<Value> {
    manifest[key]
        .as_array()
        .unwrap_or_else(|| panic!("manifest has no `{key}` list"))
}

fn field<'a>(entry: &'a Value, key: &str) -> &'a str {
    entry[key]
        .as_str()
        .unwrap_or_else(|| panic!("manifest entry lacks `{key}`: {entry}"))
}

/// Decode → render → re-encode, for one message kind; returns the failures.
fn check_valid(
    kind: &str,
    decode_render_encode: impl Fn(&[u8]) -> Result<(Value, Vec<u8>), String>,
) {
    let (dir, manifest) = manifest(kind);
    let cases = entries(&manifest, "cases");
    assert!(!cases.is_empty(), "{kind}: the manifest lists no case");
    let mut failures = Vec::new();
    for case in cases {
        let name = field(case, "name");
        let bin = read(&dir.join(field(case, "bin")));
        let expected = json_file(&dir.join(field(case, "json")));
        match decode_render_encode(&bin) {
            Err(e) => failures.push(format!("{kind}/{name}: refused: {e}")),
            Ok((rendered, reencoded)) => {
                if rendered != expected {
                    failures.push(format!(
                        "{kind}/{name}: rendering differs\n  got:      {rendered}\n  expected: {expected}"
                    ));
                }
                if reencoded != bin {
                    failures.push(format!("{kind}/{name}: re-encoding differs from the .bin"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn check_invalid(kind: &str, code_of: impl Fn(&[u8]) -> Option<String>) {
    let (dir, manifest) = manifest(kind);
    let invalid = entries(&manifest, "invalid");
    assert!(
        !invalid.is_empty(),
        "{kind}: the manifest lists no invalid case"
    );
    let mut failures = Vec::new();
    for case in invalid {
        let name = field(case, "name");
        let file = case
            .get("bin")
            .or_else(|| case.get("json"))
            .and_then(Value::as_str);
        let file = file.unwrap_or_else(|| panic!("{kind}/{name}: no file named"));
        let expected = field(case, "error");
        match code_of(&read(&dir.join(file))) {
            None => failures.push(format!(
                "{kind}/invalid/{name}: accepted, expected {expected}"
            )),
            Some(code) if code != expected => failures.push(format!(
                "{kind}/invalid/{name}: refused with {code}, expected {expected}"
            )),
            Some(_) => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn request_vectors_round_trip() {
    check_valid("request", |bin| {
        let request = sync_ssp2::decode_request(bin).map_err(|e| format!("{} ({e})", e.code()))?;
        let bytes = sync_ssp2::encode_request(&request).map_err(|e| e.to_string())?;
        Ok((render_request(&request), bytes))
    });
}

#[test]
fn request_invalid_vectors_are_refused_with_their_code() {
    check_invalid("request", |bin| {
        sync_ssp2::decode_request(bin)
            .err()
            .map(|e| e.code().to_string())
    });
}

#[test]
fn response_vectors_round_trip() {
    check_valid("response", |bin| {
        let response =
            sync_ssp2::decode_response(bin).map_err(|e| format!("{} ({e})", e.code()))?;
        let bytes = sync_ssp2::encode_response(&response).map_err(|e| e.to_string())?;
        Ok((render_response(&response), bytes))
    });
}

#[test]
fn response_invalid_vectors_are_refused_with_their_code() {
    check_invalid("response", |bin| {
        sync_ssp2::decode_response(bin)
            .err()
            .map(|e| e.code().to_string())
    });
}

#[test]
fn segment_vectors_round_trip() {
    check_valid("segment", |bin| {
        let segment = sync_ssp2::decode_segment(bin).map_err(|e| format!("{} ({e})", e.code()))?;
        let bytes = sync_ssp2::encode_segment(&segment).map_err(|e| e.to_string())?;
        Ok((render_segment(&segment), bytes))
    });
}

#[test]
fn segment_invalid_vectors_are_refused_with_their_code() {
    check_invalid("segment", |bin| {
        sync_ssp2::decode_segment(bin)
            .err()
            .map(|e| e.code().to_string())
    });
}

#[test]
fn realtime_vectors_parse_and_render_back() {
    let (dir, manifest) = manifest("realtime");
    let mut failures = Vec::new();
    for case in entries(&manifest, "cases") {
        let name = field(case, "name");
        let text = String::from_utf8(read(&dir.join(field(case, "json")))).unwrap_or_default();
        match sync_ssp2::realtime::parse_control_message(&text) {
            Err(e) => failures.push(format!("realtime/{name}: refused: {e}")),
            Ok(message) => {
                if matches!(message, sync_ssp2::realtime::ControlMessage::Unknown(_)) {
                    failures.push(format!("realtime/{name}: parsed as an unknown event"));
                }
                let rendered = sync_ssp2::realtime::render_control_message(&message);
                let expected: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                if rendered != expected {
                    failures.push(format!(
                        "realtime/{name}: rendering differs\n  got:      {rendered}\n  expected: {expected}"
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn realtime_invalid_vectors_are_refused_with_their_code() {
    check_invalid("realtime", |bytes| {
        let text = String::from_utf8_lossy(bytes);
        sync_ssp2::realtime::parse_control_message(&text)
            .err()
            .map(|e| e.code().to_string())
    });
}
