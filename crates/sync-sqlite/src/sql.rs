//! Identifier quoting and placeholder lists. Identifiers are always quoted
//! and only ever come from a compiled schema; values are always bound.

use std::fmt::Write;

/// `"name"` with embedded `"` doubled.
pub(crate) fn quote(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 2);
    out.push('"');
    for c in name.chars() {
        if c == '"' {
            out.push('"');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// `?first, ?first+1, …` for `count` numbered parameters.
pub(crate) fn placeholders(first: usize, count: usize) -> String {
    let mut out = String::new();
    for i in 0..count {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "?{}", first + i);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_and_numbers() {
        assert_eq!(quote("tasks"), "\"tasks\"");
        assert_eq!(quote("a\"b"), "\"a\"\"b\"");
        assert_eq!(placeholders(3, 3), "?3, ?4, ?5");
        assert_eq!(placeholders(1, 0), "");
    }
}
