//! Property tests: layouts round-trip, and the parser, the compiler and the
//! query preparation never panic on arbitrary input.

mod support;

use proptest::prelude::*;
use serde_json::{json, Map, Value};
use sync_core::{ErrorCode, LayoutColumn};
use sync_schema::{compile, parse_layouts, parse_schema_json, parse_schema_value, StoredLayouts};

fn layout_column() -> impl Strategy<Value = LayoutColumn> {
    let column_type = prop_oneof![
        Just("string".to_owned()),
        Just("integer".to_owned()),
        Just("blob_ref".to_owned()),
        any::<String>(),
    ];
    (any::<String>(), column_type, any::<bool>()).prop_map(|(name, column_type, nullable)| {
        LayoutColumn {
            name,
            column_type,
            nullable,
        }
    })
}

fn stored_layouts() -> impl Strategy<Value = StoredLayouts> {
    prop::collection::vec(
        (
            any::<String>(),
            prop::collection::vec(layout_column(), 0..6),
        ),
        0..6,
    )
    .prop_map(|tables| {
        let mut layouts = StoredLayouts::new();
        for (name, layout) in tables {
            layouts.insert(name, layout);
        }
        layouts
    })
}

/// Arbitrary JSON trees.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        any::<String>().prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((any::<String>(), inner), 0..6)
                .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

fn pick<T: Clone + std::fmt::Debug + 'static>(items: &'static [T]) -> impl Strategy<Value = T> {
    prop::sample::select(items)
}

const NAMES: &[&str] = &[
    "id", "v", "Id", "tasks", "Tasks", "", "sync_x", "_synch", "a\u{0}", "é", "x\"y",
];
const TYPES: &[&str] = &[
    "string", "integer", "float", "boolean", "json", "bytes", "blob_ref", "crdt", "decimal",
];
const PATTERNS: &[&str] = &[
    "s:{v}", "s:{id}", "a:b:{v}", "{v}", "s:v", "p:{a:b}", "s:{x}",
];

/// Schema-shaped JSON that reaches every compile rule: known members with
/// valid and invalid values, sometimes a wrong JSON type.
fn schema_like() -> impl Strategy<Value = Value> {
    let member = |value: BoxedStrategy<Value>| prop_oneof![4 => value.prop_map(Some), 1 => Just(None), 1 => json_value().prop_map(Some)];
    let column = (
        member(pick(NAMES).prop_map(Value::from).boxed()),
        member(pick(TYPES).prop_map(Value::from).boxed()),
        member(any::<bool>().prop_map(Value::from).boxed()),
        prop::option::of(pick(&["yjs-doc", ""]).prop_map(Value::from)),
        prop::option::of(any::<bool>().prop_map(Value::from)),
        prop::option::of(pick(TYPES).prop_map(Value::from)),
    )
        .prop_map(|(name, ty, nullable, crdt, encrypted, declared)| {
            let mut obj = Map::new();
            for (key, value) in [
                ("name", name),
                ("type", ty),
                ("nullable", nullable),
                ("crdtType", crdt),
                ("encrypted", encrypted),
                ("declaredType", declared),
            ] {
                if let Some(value) = value {
                    obj.insert(key.to_owned(), value);
                }
            }
            Value::Object(obj)
        });
    let scope = prop_oneof![
        pick(PATTERNS).prop_map(Value::from),
        (pick(PATTERNS), pick(NAMES)).prop_map(|(p, c)| json!({"pattern": p, "column": c})),
    ];
    let index = (
        pick(NAMES),
        prop::collection::vec(pick(NAMES), 0..3),
        any::<bool>(),
    )
        .prop_map(
            |(name, columns, unique)| json!({"name": name, "columns": columns, "unique": unique}),
        );
    let table = (
        pick(NAMES),
        pick(NAMES),
        prop::collection::vec(column, 0..5),
        prop::collection::vec(scope, 0..3),
        prop::option::of(prop::collection::vec(index, 0..3)),
        prop::option::of(any::<bool>()),
    )
        .prop_map(|(name, pk, columns, scopes, indexes, materialize)| {
            let mut t =
                json!({"name": name, "primaryKey": pk, "columns": columns, "scopes": scopes});
            if let Some(indexes) = indexes {
                t["indexes"] = json!(indexes);
            }
            if let Some(m) = materialize {
                t["materialize"] = json!(m);
            }
            t
        });
    let version = prop_oneof![
        Just(json!(1)),
        Just(json!(0)),
        Just(json!(2147483648u64)),
        Just(json!(1.5)),
        any::<i64>().prop_map(Value::from),
    ];
    (version, prop::collection::vec(table, 0..4))
        .prop_map(|(version, tables)| json!({"version": version, "tables": tables}))
}

fn assert_coded(result: sync_core::Result<sync_core::CompiledSchema>) {
    if let Err(error) = result {
        assert!(error.code().is_schema_compile(), "{error:?}");
    }
}

fn parse_and_compile_value(value: &Value) {
    assert_coded(parse_schema_value(value).and_then(|input| compile(&input)));
    assert_coded(parse_schema_json(&value.to_string()).and_then(|input| compile(&input)));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn layouts_serialize_then_parse_is_identity(layouts in stored_layouts()) {
        let text = layouts.to_json_text();
        let parsed = parse_layouts(Some(&text)).unwrap();
        prop_assert_eq!(&parsed, &layouts);
        prop_assert_eq!(parsed.to_json_text(), text);
    }

    #[test]
    fn parser_and_compiler_never_panic_on_arbitrary_json(value in json_value()) {
        parse_and_compile_value(&value);
        let wrapped = json!({"version": 1, "tables": [value]});
        parse_and_compile_value(&wrapped);
    }

    #[test]
    fn parser_and_compiler_never_panic_on_schema_like_json(value in schema_like()) {
        parse_and_compile_value(&value);
    }

    #[test]
    fn parser_never_panics_on_arbitrary_strings(text in any::<String>()) {
        assert_coded(parse_schema_json(&text).and_then(|input| compile(&input)));
    }

    #[test]
    fn layouts_parser_never_panics(text in any::<String>()) {
        if let Err(error) = parse_layouts(Some(&text)) {
            prop_assert_eq!(error.code(), ErrorCode::LayoutsCorrupt);
        }
    }

    #[test]
    fn query_preparation_never_panics(sql in any::<String>(), tail in "[ ?;'\"`\\[\\]()./*a-zA-Z_0-9-]{0,40}") {
        let schema = support::fix1();
        for dialect in [sync_sqlite::DIALECT, sync_postgres::DIALECT] {
            for text in [sql.as_str(), tail.as_str(), &format!("SELECT id FROM tasks {tail}")] {
                let result = sync_schema::prepare_query(
                    &schema,
                    dialect,
                    "p",
                    text,
                    &[sync_core::SqlValue::Integer(1)],
                    &["tasks".to_owned()],
                );
                if let Err(error) = result {
                    prop_assert_eq!(error.code(), ErrorCode::QueryRejected);
                }
            }
        }
    }
}
