//! How a value that comes from data (a partition, a row or client id, a
//! table name, payload text, an error detail) is shown, so that it can
//! neither drive the terminal nor pass for another field or line.
//!
//! - [`safe`]: every character a terminal acts on — C0 and C1 controls,
//!   DEL, the bidi controls (U+061C, U+200E/F, U+202A–U+202E,
//!   U+2066–U+2069) and the line and paragraph separators U+2028/U+2029 —
//!   escaped Rust-style (`\n`, `\r`, `\t`, otherwise `\u{…}`).
//! - [`field`]: a value inside a line of text: [`safe`], and quoted (`"…"`,
//!   with `\"` and `\\` inside) when it is empty or holds whitespace (every
//!   separator of the text output — `, `, `: `, ` ` — has some), a quote, a
//!   backslash or anything [`safe`] escapes. A quoted value is read back
//!   unambiguously. [`pair`] writes `partition:name`, quoting a side that
//!   holds a `:` as well.
//! - [`json_text`]: a JSON document with every such character that
//!   `serde_json` leaves raw (C1 controls, DEL, bidi controls,
//!   U+2028/U+2029) written as `\uXXXX` — the same document to a parser,
//!   inert on a terminal and in a JavaScript source.

use serde_json::Value;

/// The characters that make a value quoted besides whitespace: the quotes
/// and the escape character themselves.
const QUOTING: &[char] = &['"', '\'', '\\'];

/// Whether `c` must not reach a terminal raw.
fn acts_on_terminal(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}'
                | '\u{200E}'
                | '\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2066}'..='\u{2069}'
                | '\u{2028}'
                | '\u{2029}'
        )
}

/// `value` with every character a terminal acts on escaped (`\n`,
/// `\u{1b}`, `\u{202e}`).
pub fn safe(value: &str) -> String {
    if !value.chars().any(acts_on_terminal) {
        return value.to_owned();
    }
    let mut out = String::with_capacity(value.len() + 8);
    for c in value.chars() {
        if acts_on_terminal(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// `value` as one field of a line of text: [`safe`], and quoted when it
/// could otherwise be read as more than one field or as another value.
pub fn field(value: &str) -> String {
    quoted_unless_plain(value, &[])
}

/// `first:second` (a checkpoint's partition and name), each side a
/// [`field`], quoted also when it holds a `:`.
pub fn pair(first: &str, second: &str) -> String {
    format!(
        "{}:{}",
        quoted_unless_plain(first, &[':']),
        quoted_unless_plain(second, &[':'])
    )
}

fn quoted_unless_plain(value: &str, separators: &[char]) -> String {
    let plain = !value.is_empty()
        && !value.chars().any(|c| {
            c.is_whitespace()
                || QUOTING.contains(&c)
                || separators.contains(&c)
                || acts_on_terminal(c)
        });
    if plain {
        return value.to_owned();
    }
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if acts_on_terminal(c) => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `value` as JSON text (indented when `pretty`), every character
/// [`safe`] escapes written as `\uXXXX`.
pub fn json_text(value: &Value, pretty: bool) -> String {
    let text = if pretty {
        serde_json::to_string_pretty(value)
    } else {
        serde_json::to_string(value)
    }
    .unwrap_or_else(|_| value.to_string());
    // `serde_json` escapes every C0 control inside strings, so a raw one is
    // the layout's own newline. Every other such character stands in a
    // string (outside strings JSON is ASCII), where `\uXXXX` means the same.
    let escaped = |c: char| u32::from(c) >= 0x20 && acts_on_terminal(c);
    if !text.chars().any(escaped) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if escaped(c) {
            // Every such character is in the Basic Multilingual Plane.
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const HOSTILE: &[char] = &[
        '\u{1b}', '\u{7}', '\n', '\r', '\u{7f}', '\u{85}', '\u{9b}', '\u{200e}', '\u{200f}',
        '\u{202a}', '\u{202e}', '\u{2066}', '\u{2069}', '\u{2028}', '\u{2029}', '\u{61c}',
    ];

    #[test]
    fn terminal_controls_are_escaped() {
        assert_eq!(safe("plain"), "plain");
        assert_eq!(safe("a\u{1b}[31mred"), "a\\u{1b}[31mred");
        assert_eq!(safe("x\nerror: fake"), "x\\nerror: fake");
        assert_eq!(safe("evil\u{202e}txt.exe"), "evil\\u{202e}txt.exe");
        assert_eq!(safe("a\u{2028}b\u{9b}c"), "a\\u{2028}b\\u{9b}c");
        for c in HOSTILE {
            let shown = safe(&format!("a{c}b"));
            assert!(!shown.contains(*c), "{c:?} → {shown:?}");
        }
    }

    #[test]
    fn fields_that_could_pass_for_others_are_quoted() {
        assert_eq!(field("p1"), "p1");
        assert_eq!(field("t-0001"), "t-0001");
        assert_eq!(field(""), "\"\"");
        assert_eq!(
            field("p1: max_commit_seq 99, horizon 0"),
            "\"p1: max_commit_seq 99, horizon 0\""
        );
        assert_eq!(field("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(field("x\u{202e}y"), "\"x\\u{202e}y\"");
        // A value that spells an escape is told apart from the character.
        assert_ne!(field("a\\u{1b}"), field("a\u{1b}"));
        assert_eq!(field("no\u{a0}break"), "\"no\u{a0}break\"");
        assert_eq!(field("user:test"), "user:test");
        assert_eq!(pair("acme", "search_v2"), "acme:search_v2");
        assert_eq!(pair("a:b", "c"), "\"a:b\":c");
        assert_ne!(pair("a:b", "c"), pair("a", "b:c"));
        for c in HOSTILE {
            let shown = field(&format!("a{c}b"));
            assert!(!shown.contains(*c), "{c:?} → {shown:?}");
        }
    }

    #[test]
    fn json_text_escapes_what_serde_json_leaves_raw() {
        let value = json!({"id": "a\u{9b}31m\u{2028}\u{202e}b\u{7f}", "n": 1});
        let text = json_text(&value, false);
        assert_eq!(text, r#"{"id":"a\u009b31m\u2028\u202eb\u007f","n":1}"#);
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), value);
        let pretty = json_text(&value, true);
        assert_eq!(serde_json::from_str::<Value>(&pretty).unwrap(), value);
        for c in HOSTILE {
            let value = json!({ format!("k{c}"): format!("v{c}") });
            let text = json_text(&value, false);
            assert!(!text.contains(*c), "{c:?} → {text:?}");
            assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), value);
        }
    }
}
