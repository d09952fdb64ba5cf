//! Tidy checks run by `cargo xtask test` (like rust-analyzer's tidy tests):
//! the shared crates never name a dialect, so every dialect-specific
//! decision goes through `SqlDialect`, the harness properties or the
//! binaries' dialect registries; and the reference implementation's
//! published crates, test oracles of `interop/`, never become a
//! dependency of the main workspace.

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// Crates that hold no dialect code (`docs/decisions.md`).
    const SHARED_CRATES: [&str; 7] = [
        "sync-core",
        "sync-schema",
        "sync-backfill",
        "sync-engine",
        "sync-conformance",
        "sync-wire",
        "sync-http",
    ];

    /// Crates that stay synchronous and know no HTTP (`docs/architecture.md`):
    /// only `sync-http` runs on an async runtime.
    const SYNCHRONOUS_CRATES: [&str; 4] = ["sync-core", "sync-engine", "sync-ssp2", "sync-wire"];

    /// Dependencies that bring HTTP or an async runtime.
    const ASYNC_OR_HTTP: [&str; 9] = [
        "axum",
        "tokio",
        "hyper",
        "tower",
        "http",
        "futures",
        "async-",
        "reqwest",
        "sync-http",
    ];

    /// Built-in dialect names and crates, compared ASCII case-insensitively.
    const DIALECT_WORDS: [&str; 4] = ["sqlite", "postgres", "mariadb", "mysql"];

    /// A line carrying this marker names a dialect on purpose; the comment
    /// says why (a contract-fixed message, a built-in default).
    const LINE_MARKER: &str = "tidy: dialect-name";
    /// Lines between these markers are data naming databases' catalogs
    /// (the portable registered-query mask).
    const REGION_START: &str = "tidy-allow-names";
    const REGION_END: &str = "tidy-allow-names-end";

    fn workspace_root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default()
    }

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// `file:line: text` of every code line of `text` naming a dialect.
    /// Comment lines are allowed: docs may give the built-in dialects as
    /// examples of a behaviour; code may not branch on them.
    fn offences(file: &str, text: &str) -> Vec<String> {
        let mut found = Vec::new();
        let mut in_region = false;
        for (n, line) in text.lines().enumerate() {
            let trimmed = line.trim_start();
            if trimmed.contains(REGION_END) {
                in_region = false;
                continue;
            }
            if trimmed.contains(REGION_START) {
                in_region = true;
                continue;
            }
            if in_region || trimmed.starts_with("//") || line.contains(LINE_MARKER) {
                continue;
            }
            let lower = line.to_ascii_lowercase();
            if DIALECT_WORDS.iter().any(|w| lower.contains(w)) {
                found.push(format!("{file}:{}: {}", n + 1, line.trim()));
            }
        }
        found
    }

    #[test]
    fn shared_crates_name_no_dialect() {
        let root = workspace_root();
        let mut found = Vec::new();
        for krate in SHARED_CRATES {
            let mut files = Vec::new();
            rust_files(&root.join("crates").join(krate).join("src"), &mut files);
            assert!(!files.is_empty(), "no sources found for {krate}");
            for path in files {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                let shown = path
                    .strip_prefix(&root)
                    .unwrap_or(&path)
                    .display()
                    .to_string();
                found.extend(offences(&shown, &text));
            }
        }
        assert!(
            found.is_empty(),
            "shared crates name a dialect outside comments (use SqlDialect, a harness \
             property or a registry entry instead):\n{}",
            found.join("\n")
        );
    }

    /// The `[dependencies]` and `[features]` of a crate's manifest (what
    /// ships; dev-dependencies are left out).
    fn shipped_manifest(krate: &str) -> String {
        let manifest = std::fs::read_to_string(
            workspace_root()
                .join("crates")
                .join(krate)
                .join("Cargo.toml"),
        )
        .unwrap_or_default();
        assert!(!manifest.is_empty(), "no manifest for {krate}");
        manifest
            .split("\n[")
            .filter(|section| !section.starts_with("dev-dependencies"))
            .collect::<Vec<_>>()
            .join("\n[")
    }

    #[test]
    fn the_engine_codec_and_wire_depend_on_no_http_or_async_crate() {
        for krate in SYNCHRONOUS_CRATES {
            let shipped = shipped_manifest(krate);
            for word in ASYNC_OR_HTTP {
                assert!(
                    !shipped.lines().any(|l| l.trim_start().starts_with(word)),
                    "{krate} depends on {word}"
                );
            }
        }
    }

    #[test]
    fn shared_crates_do_not_depend_on_dialect_crates() {
        let root = workspace_root();
        for krate in SHARED_CRATES {
            let manifest =
                std::fs::read_to_string(root.join("crates").join(krate).join("Cargo.toml"))
                    .unwrap_or_default();
            assert!(!manifest.is_empty(), "no manifest for {krate}");
            // Only [dependencies] and [features] ship; dev-dependencies may
            // bring the built-in dialects' values for golden tests.
            let shipped: String = manifest
                .split("\n[")
                .filter(|section| !section.starts_with("dev-dependencies"))
                .collect::<Vec<_>>()
                .join("\n[");
            for word in [
                "sync-sqlite",
                "sync-postgres",
                "sync-mariadb",
                "rusqlite",
                "postgres",
                "mysql",
            ] {
                assert!(
                    !shipped.lines().any(|l| l.trim_start().starts_with(word)),
                    "{krate} depends on {word}"
                );
            }
        }
    }

    #[test]
    fn the_scan_flags_code_and_spares_comments() {
        let text = "// SQLite docs\nlet d = Dialect::Sqlite;\nx(); // tidy: dialect-name (why)\nif name == \"postgres\" {}\n// tidy-allow-names\n\"sqlite_\",\n// tidy-allow-names-end\n\"pg\"";
        assert_eq!(
            offences("f.rs", text),
            [
                "f.rs:2: let d = Dialect::Sqlite;",
                "f.rs:4: if name == \"postgres\" {}"
            ]
        );
    }

    /// The prefix of the reference implementation's published crates.
    const ORACLE_PREFIX: &str = "syncular-";

    /// Every `Cargo.toml` under `dir`, skipping build output, the
    /// repository's metadata and the `interop/` workspace (whose whole
    /// point is to depend on the oracles).
    fn manifests(dir: &Path, root: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                let skipped = ["target", ".git", "interop"]
                    .iter()
                    .any(|name| path == root.join(name))
                    || path.file_name().is_some_and(|n| n == "target");
                if !skipped {
                    manifests(&path, root, out);
                }
            } else if path.file_name().is_some_and(|n| n == "Cargo.toml") {
                out.push(path);
            }
        }
    }

    /// `file:line: text` of every non-comment line naming an oracle crate.
    fn oracle_mentions(file: &str, text: &str) -> Vec<String> {
        text.lines()
            .enumerate()
            .filter(|(_, line)| !line.trim_start().starts_with('#'))
            .filter(|(_, line)| line.to_ascii_lowercase().contains(ORACLE_PREFIX))
            .map(|(n, line)| format!("{file}:{}: {}", n + 1, line.trim()))
            .collect()
    }

    #[test]
    fn no_manifest_of_the_workspace_names_a_published_oracle() {
        let root = workspace_root();
        let mut files = Vec::new();
        manifests(&root, &root, &mut files);
        assert!(
            files.len() > SHARED_CRATES.len(),
            "too few manifests found under {}",
            root.display()
        );
        let mut found = Vec::new();
        for path in files.iter().chain([&root.join("Cargo.lock")]) {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let shown = path
                .strip_prefix(&root)
                .unwrap_or(path)
                .display()
                .to_string();
            found.extend(oracle_mentions(&shown, &text));
        }
        assert!(
            found.is_empty(),
            "the reference's published crates are test oracles of interop/ only; \
             the main workspace names them:\n{}",
            found.join("\n")
        );
    }

    #[test]
    fn the_oracle_scan_flags_dependencies_and_spares_comments() {
        let text = "# syncular-client is an oracle\n[dev-dependencies]\nsyncular-ssp2 = \"=0.15.48\"\nssp2 = { package = \"syncular-ssp2\", version = \"1\" }\nsync-ssp2 = { path = \"../sync-ssp2\" }";
        assert_eq!(
            oracle_mentions("Cargo.toml", text),
            [
                "Cargo.toml:3: syncular-ssp2 = \"=0.15.48\"",
                "Cargo.toml:4: ssp2 = { package = \"syncular-ssp2\", version = \"1\" }"
            ]
        );
    }
}
