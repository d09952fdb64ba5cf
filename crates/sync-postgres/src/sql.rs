//! Small SQL text helpers: identifier and literal quoting.

/// Double-quotes an identifier, doubling embedded quotes.
pub(crate) fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A string literal for the simple query protocol (`E'…'`, backslashes and
/// quotes escaped). `None` when the text holds a NUL, which no Postgres text
/// value can contain (callers then use a parameterized statement, which
/// reports the error).
pub(crate) fn quote_literal(text: &str) -> Option<String> {
    if text.contains('\0') {
        return None;
    }
    let escaped = text.replace('\\', "\\\\").replace('\'', "''");
    Some(format!("E'{escaped}'"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_double_embedded_quotes() {
        assert_eq!(quote_ident("ta\"sks"), "\"ta\"\"sks\"");
    }

    #[test]
    fn literals_escape_quotes_and_backslashes() {
        assert_eq!(quote_literal("a'b\\c").as_deref(), Some("E'a''b\\\\c'"));
        assert_eq!(quote_literal("a\0b"), None);
    }
}
