//! Restoring a `pg_dump` written for schema `public` (such as the reference
//! fixtures of `README.md` §6) into another schema: the dump's schema
//! qualifiers and `search_path` settings are rewritten (outside `COPY` data),
//! its psql-only `\restrict` / `\unrestrict` lines are dropped, and the
//! result is fed to `psql -v ON_ERROR_STOP=1` (psql must be installed).
//!
//! Used by the conformance harness and the fixture acceptance tests; it is
//! tooling, not part of the storage contract.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use sync_core::{Error, ErrorCode, Result};

use crate::sql::quote_ident;

/// Rewrites the dump text for `schema`.
pub fn rewrite_dump(dump: &str, schema: &str) -> String {
    let quoted = quote_ident(schema);
    let literal = quoted.replace('\'', "''");
    let mut out = String::with_capacity(dump.len() + 1024);
    let mut in_copy = false;
    for line in dump.lines() {
        if in_copy {
            out.push_str(line);
            out.push('\n');
            if line == "\\." {
                in_copy = false;
            }
            continue;
        }
        let trimmed = line.trim_start();
        if trimmed.starts_with("\\restrict") || trimmed.starts_with("\\unrestrict") {
            continue;
        }
        if trimmed.starts_with("CREATE SCHEMA public")
            || trimmed.starts_with("ALTER SCHEMA public")
            || trimmed.starts_with("COMMENT ON SCHEMA public")
        {
            continue;
        }
        if trimmed.starts_with("SELECT pg_catalog.set_config('search_path'") {
            out.push_str(&format!(
                "SELECT pg_catalog.set_config('search_path', '{literal}', false);\n"
            ));
            continue;
        }
        if trimmed.starts_with("SET search_path") {
            out.push_str(&format!("SET search_path TO {quoted};\n"));
            continue;
        }
        let rewritten = line.replace("public.", &format!("{quoted}."));
        if trimmed.starts_with("COPY ") && trimmed.ends_with("FROM stdin;") {
            in_copy = true;
        }
        out.push_str(&rewritten);
        out.push('\n');
    }
    out
}

/// Loads the dump at `dump_path` into `schema` (which must exist) on the
/// server at `url` with `psql`.
pub fn load_into_schema(url: &str, schema: &str, dump_path: &Path) -> Result<()> {
    let dump = std::fs::read_to_string(dump_path).map_err(|e| {
        Error::new(ErrorCode::Backend)
            .detail("reason", "fixture_unreadable")
            .detail("path", dump_path.display())
            .source_error(e)
    })?;
    let script = rewrite_dump(&dump, schema);
    let mut child = Command::new("psql")
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            Error::new(ErrorCode::Backend)
                .detail("reason", "psql_unavailable")
                .source_error(e)
        })?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(script.as_bytes()).map_err(|e| {
            Error::new(ErrorCode::Backend)
                .detail("reason", "psql_stdin")
                .source_error(e)
        })?;
    }
    let output = child.wait_with_output().map_err(|e| {
        Error::new(ErrorCode::Backend)
            .detail("reason", "psql_wait")
            .source_error(e)
    })?;
    if !output.status.success() {
        return Err(Error::new(ErrorCode::Backend)
            .detail("reason", "psql_failed")
            .detail("stderr", String::from_utf8_lossy(&output.stderr)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualifiers_are_rewritten_outside_copy_data_only() {
        let dump = "\\restrict abc\nSELECT pg_catalog.set_config('search_path', '', false);\n\
                    CREATE TABLE public.t (a text);\nCOPY public.t (a) FROM stdin;\npublic.x\n\\.\n\
                    ALTER TABLE ONLY public.t ADD CONSTRAINT t_pkey PRIMARY KEY (a);\n\\unrestrict abc\n";
        let out = rewrite_dump(dump, "conf_1");
        assert!(!out.contains("restrict"));
        assert!(out.contains("CREATE TABLE \"conf_1\".t (a text);"));
        assert!(out.contains("COPY \"conf_1\".t (a) FROM stdin;\npublic.x\n\\.\n"));
        assert!(out.contains("ALTER TABLE ONLY \"conf_1\".t"));
        assert!(out.contains("set_config('search_path', '\"conf_1\"', false)"));
    }
}
