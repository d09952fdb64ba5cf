//! `ssp2 render` and `ssp2 reencode` on the SSP2 golden vectors: every
//! valid file renders to its `.json` and re-encodes to its own bytes (exit
//! 0); every invalid one prints `{"error": {"code": …}}` with the code its
//! manifest names (exit 1).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn vectors() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/ssp2-vectors");
    assert!(
        dir.join("README.md").is_file(),
        "the SSP2 golden vectors are missing: expected them at {}",
        dir.display()
    );
    dir
}

fn syncstore(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_syncstore"))
        .args(args)
        .output()
        .expect("the syncstore binary runs")
}

fn json_at(path: &Path) -> Value {
    let text = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn list<'a>(manifest: &'a Value, key: &str) -> &'a [Value] {
    manifest[key]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
}

#[test]
fn render_and_reencode_every_vector() {
    let root = vectors();
    let mut checked = 0;
    for kind in ["request", "response", "segment"] {
        let dir = root.join(kind);
        let manifest = json_at(&dir.join("manifest.json"));
        for case in list(&manifest, "cases") {
            let name = case["name"].as_str().unwrap_or("?");
            let bin = dir.join(case["bin"].as_str().unwrap_or_default());
            let bin = bin.to_str().expect("UTF-8 path");

            let render = syncstore(&["ssp2", "render", "--kind", kind, bin]);
            assert_eq!(
                render.status.code(),
                Some(0),
                "{kind}/{name}: render failed"
            );
            let rendered: Value = serde_json::from_slice(&render.stdout)
                .unwrap_or_else(|e| panic!("{kind}/{name}: render printed no JSON: {e}"));
            let expected = json_at(&dir.join(case["json"].as_str().unwrap_or_default()));
            assert_eq!(rendered, expected, "{kind}/{name}: rendering");

            let reencode = syncstore(&["ssp2", "reencode", "--kind", kind, bin]);
            assert_eq!(
                reencode.status.code(),
                Some(0),
                "{kind}/{name}: reencode failed"
            );
            let original = std::fs::read(bin).unwrap_or_default();
            assert!(
                reencode.stdout == original,
                "{kind}/{name}: re-encoding differs"
            );
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} vectors checked");
}

#[test]
fn invalid_vectors_print_their_error_code_and_exit_one() {
    let root = vectors();
    let mut checked = 0;
    for kind in ["request", "response", "segment"] {
        let dir = root.join(kind);
        let manifest = json_at(&dir.join("manifest.json"));
        for case in list(&manifest, "invalid") {
            let name = case["name"].as_str().unwrap_or("?");
            let bin = dir.join(case["bin"].as_str().unwrap_or_default());
            let bin = bin.to_str().expect("UTF-8 path");
            for verb in ["render", "reencode"] {
                let run = syncstore(&["ssp2", verb, "--kind", kind, bin]);
                assert_eq!(
                    run.status.code(),
                    Some(1),
                    "{kind}/invalid/{name}: {verb} exit"
                );
                let document: Value = serde_json::from_slice(&run.stdout).unwrap_or_else(|e| {
                    panic!("{kind}/invalid/{name}: {verb} printed no JSON: {e}")
                });
                assert_eq!(
                    document["error"]["code"], case["error"],
                    "{kind}/invalid/{name}: {verb} code"
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 12, "only {checked} invalid vectors checked");
}

#[test]
fn an_unreadable_file_exits_two() {
    let run = syncstore(&[
        "ssp2",
        "render",
        "--kind",
        "segment",
        "/nonexistent/ssp2.bin",
    ]);
    assert_eq!(run.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&run.stderr).contains("sync.cli.io"));
}
