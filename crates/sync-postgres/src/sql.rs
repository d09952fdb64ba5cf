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

/// A `bytea` literal for the simple query protocol in hex form
/// (`E'\\x…'::bytea`, written like [`quote_literal`]'s escape strings).
pub(crate) fn bytea_literal(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut sql = String::with_capacity(bytes.len() * 2 + 16);
    sql.push_str("E'\\\\x");
    for byte in bytes {
        sql.push(char::from(HEX[usize::from(byte >> 4)]));
        sql.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    sql.push_str("'::bytea");
    sql
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

    #[test]
    fn bytea_literals_are_escaped_hex() {
        assert_eq!(bytea_literal(&[0x00, 0x7f, 0xff]), "E'\\\\x007fff'::bytea");
        assert_eq!(bytea_literal(&[]), "E'\\\\x'::bytea");
    }
}
