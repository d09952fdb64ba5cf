//! Canonical JSON (§11.2), the form the protocol hashes: UTF-8, no
//! insignificant whitespace, object keys sorted by UTF-16 code units,
//! numbers in their shortest round-trip form as JavaScript writes them.

use serde_json::Value;

use crate::values::cmp_utf16;

/// `value` in canonical JSON.
///
/// Scope value lists are not sorted here (an array's order is data); the
/// scope digest sorts and deduplicates them before rendering
/// ([`crate::digest::canonical_scopes_json`]).
pub fn to_canonical_string(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                out.push_str(&i.to_string());
            } else if let Some(u) = n.as_u64() {
                out.push_str(&u.to_string());
            } else {
                // serde_json numbers are finite, so this is always `Some`.
                out.push_str(
                    &n.as_f64()
                        .and_then(js_number)
                        .unwrap_or_else(|| "null".into()),
                );
            }
        }
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| cmp_utf16(a.0, b.0));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, key);
                out.push(':');
                write_value(out, item);
            }
            out.push('}');
        }
    }
}

/// A JSON string literal with JavaScript's escapes.
pub(crate) fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if c < ' ' => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `f` as JavaScript's `Number.prototype.toString` writes it (shortest
/// round-trip digits; exponent form below 1e-6 and from 1e21); `None` for
/// NaN and the infinities, which JSON cannot carry.
pub fn js_number(f: f64) -> Option<String> {
    if !f.is_finite() {
        return None;
    }
    if f == 0.0 {
        return Some("0".into());
    }
    let sign = if f < 0.0 { "-" } else { "" };
    // `{:e}` gives the shortest digits that round-trip, e.g. "1.25e-7".
    let sci = format!("{:e}", f.abs());
    let (mantissa, exponent) = sci.split_once('e')?;
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let exponent: i32 = exponent.parse().ok()?;
    let k = digits.len() as i32;
    let n = exponent + 1;
    let body = if k <= n && n <= 21 {
        format!("{digits}{}", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= 21 {
        format!("{}.{}", &digits[..n as usize], &digits[n as usize..])
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let e = n - 1;
        let e_sign = if e >= 0 { "+" } else { "-" };
        let (first, rest) = digits.split_at(1);
        if rest.is_empty() {
            format!("{first}e{e_sign}{}", e.abs())
        } else {
            format!("{first}.{rest}e{e_sign}{}", e.abs())
        }
    };
    Some(format!("{sign}{body}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_are_written_as_javascript_does() {
        for (f, s) in [
            (1.0, "1"),
            (-1.5, "-1.5"),
            (0.125, "0.125"),
            (1e21, "1e+21"),
            (1e20, "100000000000000000000"),
            (1.5e-7, "1.5e-7"),
            (0.000001, "0.000001"),
            (123.456, "123.456"),
            (-0.0, "0"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
        ] {
            assert_eq!(js_number(f).as_deref(), Some(s), "{f}");
        }
        assert_eq!(js_number(f64::NAN), None);
    }

    #[test]
    fn keys_sort_by_utf16_and_whitespace_goes() {
        let v = json!({"\u{FFFD}": 1, "\u{1F600}": [true, null], "a": {"z": "x\ny", "b": 2.5}});
        assert_eq!(
            to_canonical_string(&v),
            "{\"a\":{\"b\":2.5,\"z\":\"x\\ny\"},\"\u{1F600}\":[true,null],\"\u{FFFD}\":1}"
        );
    }
}
