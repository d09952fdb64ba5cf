//! The readiness wrapper `ensure_ready` (`storage-contract.md` §7.5).

use sync_core::{CompiledSchema, EnsureOptions, Error, ErrorCode, Result, ServerStorage};

use crate::compile::compile;
use crate::input::SchemaInput;

/// Compiles `input` and ensures it on `storage`.
///
/// Any failure becomes `sync.schema_not_ready` with `details.phase`
/// (`schema_compile` or `storage_migration`), `details.schemaVersion` (the
/// input's version as written) and `details.cause` (the inner code); the
/// inner error is kept as the `source`.
pub fn ensure_ready(
    input: &SchemaInput,
    storage: &dyn ServerStorage,
    opts: &EnsureOptions,
) -> Result<CompiledSchema> {
    ensure_ready_with(input, |schema| storage.ensure_schema(schema, opts))
}

/// [`ensure_ready`] with the `ensure_schema` step supplied by the caller.
pub fn ensure_ready_with(
    input: &SchemaInput,
    ensure: impl FnOnce(&CompiledSchema) -> Result<()>,
) -> Result<CompiledSchema> {
    let not_ready = |phase: &str, cause: Error| {
        Error::new(ErrorCode::SchemaNotReady)
            .detail("phase", phase)
            .detail("schemaVersion", &input.version)
            .detail("cause", cause.code())
            .source_error(cause)
    };
    let schema = compile(input).map_err(|e| not_ready("schema_compile", e))?;
    ensure(&schema).map_err(|e| not_ready("storage_migration", e))?;
    Ok(schema)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::parse_schema_json;

    const OK: &str = r#"{"version":3,"tables":[{"name":"t","primaryKey":"id","columns":[{"name":"id","type":"string"}],"scopes":["t:{id}"]}]}"#;

    #[test]
    fn compile_failure_is_not_ready_in_phase_schema_compile() {
        let input = parse_schema_json(&OK.replace("\"string\"", "\"decimal\"")).unwrap();
        let error = ensure_ready_with(&input, |_| panic!("must not ensure")).unwrap_err();
        assert_eq!(error.code(), ErrorCode::SchemaNotReady);
        assert_eq!(error.get_detail("phase"), Some("schema_compile"));
        assert_eq!(error.get_detail("schemaVersion"), Some("3"));
        assert_eq!(
            error.get_detail("cause"),
            Some("schema.unsupported_column_type")
        );
        let source = std::error::Error::source(&error).unwrap().to_string();
        assert!(source.starts_with("schema.unsupported_column_type: "));
    }

    #[test]
    fn storage_failure_is_not_ready_in_phase_storage_migration() {
        let input = parse_schema_json(OK).unwrap();
        let error = ensure_ready_with(&input, |_| Err(Error::new(ErrorCode::CheckpointIncomplete)))
            .unwrap_err();
        assert_eq!(error.code(), ErrorCode::SchemaNotReady);
        assert_eq!(error.get_detail("phase"), Some("storage_migration"));
        assert_eq!(
            error.get_detail("cause"),
            Some("sync.storage.checkpoint_incomplete")
        );
        assert_eq!(error.get_detail("schemaVersion"), Some("3"));
    }

    #[test]
    fn success_returns_the_compiled_schema() {
        let input = parse_schema_json(OK).unwrap();
        let mut seen = None;
        let schema = ensure_ready_with(&input, |s| {
            seen = Some(s.version);
            Ok(())
        })
        .unwrap();
        assert_eq!(schema.version, 3);
        assert_eq!(seen, Some(3));
    }
}
