//! The body of `POST /test/instances`: a schema, a partition, the virtual
//! clock's start and optional limits.
//!
//! ```json
//! {"schema": {"version": 1, "tables": [...]},
//!  "partition": "p1", "nowMs": 1700000000000,
//!  "limits": {"maxOperationsPerRequest": 500, "inlineSegmentMaxBytes": 262144,
//!             "segmentTtlMs": 86400000, "maxDeltaBytes": 1048576,
//!             "maxPresenceBytes": 8192}}
//! ```
//!
//! The schema is the schema input of `migrate --schema`; a scope given as
//! `{"pattern": "p:{v}"}` without `column` is the pattern alone (the
//! variable names the column). The realtime limits bound the instance's
//! hub: `maxDeltaBytes` is the largest delta message sent (a larger one
//! becomes a `delta-too-large` wake-up), `maxPresenceBytes` the largest
//! presence document. `signedUrls` and `leases` ask for what this server
//! does not serve: `sync.cli.control_unsupported`.

use serde_json::{Map, Value};
use sync_core::CompiledSchema;
use sync_engine::MAX_SAFE_INTEGER;
use sync_wire::realtime::RealtimeConfig;

use super::fields::{integer, member, object, required_integer, text};
use crate::error::{CliCode, CliError, CliResult};

/// What an instance is created with.
#[derive(Debug, Clone)]
pub(crate) struct CreateOptions {
    /// The compiled schema.
    pub schema: CompiledSchema,
    /// The instance's one partition.
    pub partition: String,
    /// The virtual clock's start, ms since the epoch.
    pub now_ms: i64,
    /// The limits.
    pub limits: InstanceLimits,
}

/// Limits of one instance (defaults: the engine's and the wire's own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct InstanceLimits {
    /// Operations over all pushes of one request.
    pub max_operations_per_request: usize,
    /// The largest rows segment sent inline.
    pub inline_segment_max_bytes: usize,
    /// How long a stored segment stays downloadable (virtual ms).
    pub segment_ttl_ms: i64,
    /// Bytes of one realtime delta message; a larger one is sent as a
    /// `delta-too-large` wake-up.
    pub max_delta_bytes: usize,
    /// Bytes of one presence document.
    pub max_presence_bytes: usize,
}

impl Default for InstanceLimits {
    fn default() -> Self {
        Self {
            max_operations_per_request: sync_engine::Limits::default().max_operations_per_request,
            inline_segment_max_bytes: sync_wire::DEFAULT_INLINE_LIMIT,
            segment_ttl_ms: sync_wire::WireConfig::default().segment_ttl_ms,
            max_delta_bytes: RealtimeConfig::default().max_message_bytes,
            max_presence_bytes: RealtimeConfig::default().max_presence_doc_bytes,
        }
    }
}

fn unsupported(field: &str) -> CliError {
    CliError::new(CliCode::ControlUnsupported).detail("field", field)
}

/// Parses and checks the body.
pub(crate) fn parse(body: &Value) -> CliResult<CreateOptions> {
    let known = [
        "schema",
        "partition",
        "nowMs",
        "limits",
        "signedUrls",
        "leases",
    ];
    let body = object(body, "", &known)?;
    for feature in ["signedUrls", "leases"] {
        if body.contains_key(feature) {
            return Err(unsupported(feature));
        }
    }
    let partition = text(body, "", "partition")?;
    let now_ms = required_integer(body, "", "nowMs", 0, MAX_SAFE_INTEGER)?;
    let schema = schema(member(body, "", "schema")?)?;
    let limits = match body.get("limits") {
        None | Some(Value::Null) => InstanceLimits::default(),
        Some(limits) => parse_limits(limits)?,
    };
    Ok(CreateOptions {
        schema,
        partition,
        now_ms,
        limits,
    })
}

fn parse_limits(value: &Value) -> CliResult<InstanceLimits> {
    let known = [
        "maxOperationsPerRequest",
        "inlineSegmentMaxBytes",
        "segmentTtlMs",
        "maxDeltaBytes",
        "maxPresenceBytes",
    ];
    let limits = object(value, "limits", &known)?;
    let mut out = InstanceLimits::default();
    let size = |n: i64| usize::try_from(n).unwrap_or(usize::MAX);
    if let Some(n) = integer(limits, "limits", "maxOperationsPerRequest", 1, 100_000)? {
        out.max_operations_per_request = size(n);
    }
    if let Some(n) = integer(limits, "limits", "inlineSegmentMaxBytes", 0, 64 << 20)? {
        out.inline_segment_max_bytes = size(n);
    }
    if let Some(n) = integer(limits, "limits", "segmentTtlMs", 1, MAX_SAFE_INTEGER)? {
        out.segment_ttl_ms = n;
    }
    if let Some(n) = integer(limits, "limits", "maxDeltaBytes", 1, 64 << 20)? {
        out.max_delta_bytes = size(n);
    }
    if let Some(n) = integer(limits, "limits", "maxPresenceBytes", 1, 1 << 20)? {
        out.max_presence_bytes = size(n);
    }
    Ok(out)
}

/// The schema input with every `{"pattern": …}` scope lacking a `column`
/// written as its pattern alone, compiled.
fn schema(value: &Value) -> CliResult<CompiledSchema> {
    let mut value = value.clone();
    if let Some(tables) = value.get_mut("tables").and_then(Value::as_array_mut) {
        for table in tables {
            if let Some(scopes) = table.get_mut("scopes").and_then(Value::as_array_mut) {
                for scope in scopes {
                    if let Some(pattern) = bare_pattern(scope) {
                        *scope = Value::String(pattern);
                    }
                }
            }
        }
    }
    let input = sync_schema::parse_schema_value(&value).map_err(CliError::from)?;
    sync_schema::compile(&input).map_err(CliError::from)
}

fn bare_pattern(scope: &Value) -> Option<String> {
    let object: &Map<String, Value> = scope.as_object()?;
    if object.len() != 1 {
        return None;
    }
    object.get("pattern")?.as_str().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body() -> Value {
        json!({
            "schema": {"version": 1, "tables": [{
                "name": "tasks", "primaryKey": "id",
                "columns": [{"name": "id", "type": "string", "nullable": false},
                            {"name": "project_id", "type": "string", "nullable": false}],
                "scopes": [{"pattern": "project:{project_id}"}]}]},
            "partition": "p1", "nowMs": 1000,
            "limits": {"maxOperationsPerRequest": 2, "maxDeltaBytes": 1, "maxPresenceBytes": 64}
        })
    }

    #[test]
    fn a_harness_schema_and_limits_are_read() {
        let options = parse(&body()).unwrap();
        assert_eq!(options.partition, "p1");
        assert_eq!(options.now_ms, 1000);
        assert_eq!(options.limits.max_operations_per_request, 2);
        assert_eq!(options.limits.max_delta_bytes, 1);
        assert_eq!(options.limits.max_presence_bytes, 64);
        assert_eq!(options.schema.tables[0].name, "tasks");
    }

    #[test]
    fn unserved_features_and_bad_members_are_refused_by_name() {
        let mut b = body();
        b["leases"] = json!({"ttlMs": 1});
        let e = parse(&b).unwrap_err();
        assert_eq!(e.code(), "sync.cli.control_unsupported");
        let mut b = body();
        b["signedUrls"] = json!({"ttlSeconds": 60});
        assert_eq!(parse(&b).unwrap_err().details()["field"], "signedUrls");
        let mut b = body();
        b["limits"] = json!({"maxDeltaBytes": 0});
        assert_eq!(
            parse(&b).unwrap_err().details()["field"],
            "limits.maxDeltaBytes"
        );
        let mut b = body();
        b["nowMs"] = json!("soon");
        let e = parse(&b).unwrap_err();
        assert_eq!(e.code(), "sync.cli.control_invalid_request");
        assert_eq!(e.details()["field"], "nowMs");
        let mut b = body();
        b["extra"] = json!(1);
        assert_eq!(parse(&b).unwrap_err().details()["reason"], "unknown_member");
    }
}
