//! `ssp2 render|reencode --kind request|response|segment FILE`: the SSP2
//! codec on one file. `render` prints the debug JSON rendering, `reencode`
//! writes the decoded value's encoding (equal to the input for every file
//! that decodes). A file that does not decode prints
//! `{"error": {"code", "message", "kind"}}` on stdout.

use std::io::Read;

use serde_json::{json, Value};
use sync_ssp2::render::{render_request, render_response, render_segment};
use sync_ssp2::DecodeError;

use crate::cli::{Ssp2Command, Ssp2FileArgs, Ssp2Kind};
use crate::error::{CliCode, CliError};

/// How an `ssp2` command ended.
#[derive(Debug)]
pub enum Ssp2End {
    /// The bytes to write on stdout.
    Output(Vec<u8>),
    /// The file does not decode: the error document for stdout.
    Refused(Value),
    /// The file could not be read.
    NotStarted(CliError),
}

fn read(file: &str) -> Result<Vec<u8>, CliError> {
    let mut bytes = Vec::new();
    let result = if file == "-" {
        std::io::stdin().read_to_end(&mut bytes).map(|_| ())
    } else {
        std::fs::read(file).map(|read| bytes = read)
    };
    result.map_err(|e| {
        CliError::new(CliCode::Io)
            .detail("file", file)
            .with_chain(&e)
    })?;
    Ok(bytes)
}

fn kind_name(kind: Ssp2Kind) -> &'static str {
    match kind {
        Ssp2Kind::Request => "request",
        Ssp2Kind::Response => "response",
        Ssp2Kind::Segment => "segment",
    }
}

fn refused(kind: Ssp2Kind, error: &DecodeError) -> Ssp2End {
    Ssp2End::Refused(json!({"error": {
        "code": error.code(),
        "message": error.to_string(),
        "kind": kind_name(kind),
    }}))
}

fn pretty(value: &Value) -> Vec<u8> {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    text.push('\n');
    text.into_bytes()
}

/// Decodes `bytes` as `kind`; the rendering and the re-encoding.
fn decode(kind: Ssp2Kind, bytes: &[u8]) -> Result<(Value, Result<Vec<u8>, String>), DecodeError> {
    Ok(match kind {
        Ssp2Kind::Request => {
            let request = sync_ssp2::decode_request(bytes)?;
            let encoded = sync_ssp2::encode_request(&request).map_err(|e| e.to_string());
            (render_request(&request), encoded)
        }
        Ssp2Kind::Response => {
            let response = sync_ssp2::decode_response(bytes)?;
            let encoded = sync_ssp2::encode_response(&response).map_err(|e| e.to_string());
            (render_response(&response), encoded)
        }
        Ssp2Kind::Segment => {
            let segment = sync_ssp2::decode_segment(bytes)?;
            let encoded = sync_ssp2::encode_segment(&segment).map_err(|e| e.to_string());
            (render_segment(&segment), encoded)
        }
    })
}

fn run_file(args: &Ssp2FileArgs, render: bool) -> Ssp2End {
    let bytes = match read(&args.file) {
        Ok(bytes) => bytes,
        Err(error) => return Ssp2End::NotStarted(error),
    };
    match decode(args.kind, &bytes) {
        Err(error) => refused(args.kind, &error),
        Ok((rendering, _)) if render => Ssp2End::Output(pretty(&rendering)),
        Ok((_, Ok(encoded))) => Ssp2End::Output(encoded),
        // A decoded value always encodes; should it not, say so as an error
        // document rather than write partial bytes.
        Ok((_, Err(message))) => Ssp2End::Refused(json!({"error": {
            "code": "sync.invalid_request",
            "message": message,
            "kind": kind_name(args.kind),
        }})),
    }
}

/// Runs `ssp2`.
pub fn run(command: &Ssp2Command) -> Ssp2End {
    match command {
        Ssp2Command::Render(args) => run_file(args, true),
        Ssp2Command::Reencode(args) => run_file(args, false),
    }
}
