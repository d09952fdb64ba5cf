//! RFC 8259 syntax check for host-opaque `json` values: any JSON value,
//! scalars included, with nothing but whitespace around it.
//!
//! The check only validates; it builds no value. It is iterative, so deep
//! nesting costs a byte of stack per level on the heap, bounded by the
//! input, and numbers of any magnitude and `\u` escapes of lone surrogates
//! are accepted, as the RFC's grammar accepts them.

#[derive(Clone, Copy)]
enum Container {
    Array,
    Object,
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// A string starting at the quote at `i`; the index after its closing quote.
fn string(b: &[u8], mut i: usize) -> Option<usize> {
    i += 1;
    loop {
        match *b.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => match *b.get(i + 1)? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                b'u' => {
                    let hex = b.get(i + 2..i + 6)?;
                    if !hex.iter().all(u8::is_ascii_hexdigit) {
                        return None;
                    }
                    i += 6;
                }
                _ => return None,
            },
            c if c < 0x20 => return None,
            _ => i += 1,
        }
    }
}

fn digits(b: &[u8], mut i: usize) -> Option<usize> {
    let start = i;
    while b.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    (i > start).then_some(i)
}

/// A number starting at `i`; the index after it.
fn number(b: &[u8], mut i: usize) -> Option<usize> {
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    i = match b.get(i)? {
        b'0' => i + 1,
        b'1'..=b'9' => digits(b, i)?,
        _ => return None,
    };
    if b.get(i) == Some(&b'.') {
        i = digits(b, i + 1)?;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        i = digits(b, i)?;
    }
    Some(i)
}

/// An object key and its colon, starting at `i`; the index of the value.
fn key(b: &[u8], i: usize) -> Option<usize> {
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let i = skip_ws(b, string(b, i)?);
    if b.get(i) != Some(&b':') {
        return None;
    }
    Some(skip_ws(b, i + 1))
}

fn literal(b: &[u8], i: usize, word: &[u8]) -> Option<usize> {
    (b.get(i..i + word.len())? == word).then_some(i + word.len())
}

fn document(b: &[u8]) -> Option<()> {
    let mut stack: Vec<Container> = Vec::new();
    let mut i = skip_ws(b, 0);
    loop {
        // A value starts at `i`.
        i = match *b.get(i)? {
            b'{' => {
                let j = skip_ws(b, i + 1);
                if b.get(j) == Some(&b'}') {
                    j + 1
                } else {
                    stack.push(Container::Object);
                    i = key(b, j)?;
                    continue;
                }
            }
            b'[' => {
                let j = skip_ws(b, i + 1);
                if b.get(j) == Some(&b']') {
                    j + 1
                } else {
                    stack.push(Container::Array);
                    i = j;
                    continue;
                }
            }
            b'"' => string(b, i)?,
            b't' => literal(b, i, b"true")?,
            b'f' => literal(b, i, b"false")?,
            b'n' => literal(b, i, b"null")?,
            _ => number(b, i)?,
        };
        // The value ended: close what it completes, or move to the next.
        loop {
            i = skip_ws(b, i);
            match stack.last() {
                None => return (i == b.len()).then_some(()),
                Some(Container::Array) => match *b.get(i)? {
                    b',' => {
                        i = skip_ws(b, i + 1);
                        break;
                    }
                    b']' => {
                        i += 1;
                        stack.pop();
                    }
                    _ => return None,
                },
                Some(Container::Object) => match *b.get(i)? {
                    b',' => {
                        i = key(b, skip_ws(b, i + 1))?;
                        break;
                    }
                    b'}' => {
                        i += 1;
                        stack.pop();
                    }
                    _ => return None,
                },
            }
        }
    }
}

/// Whether `text` is exactly one JSON document (RFC 8259).
pub(crate) fn is_json_document(text: &str) -> bool {
    document(text.as_bytes()).is_some()
}

#[cfg(test)]
mod tests {
    use super::is_json_document;

    #[test]
    fn accepts_every_rfc_8259_value() {
        for ok in [
            "7",
            " -0.5e+10 ",
            "\"x\"",
            "true",
            "null",
            "[]",
            "{}",
            "[1, [2, {\"a\": [ ]}], \"\\u00e9\\n\"]",
            "{\"a\":{\"b\":null},\"c\":[true,false]}",
            "1e400",
            "\"\\ud800\"",
            "\"\u{1F600}\"",
        ] {
            assert!(is_json_document(ok), "{ok}");
        }
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(is_json_document(&deep));
    }

    #[test]
    fn refuses_what_is_not_one_document() {
        for bad in [
            "",
            " ",
            "{",
            "[1,]",
            "{\"a\":1,}",
            "{\"a\"}",
            "{1:2}",
            "01",
            "1.",
            "-",
            ".5",
            "1e",
            "\"\\x\"",
            "\"\u{1}\"",
            "\"open",
            "[1] x",
            "tru",
            "nul",
            "[1 2]",
            "{\"a\":1 \"b\":2}",
            "'x'",
            "NaN",
            "\"\\u12\"",
        ] {
            assert!(!is_json_document(bad), "{bad:?}");
        }
        let unclosed = "[".repeat(100_000);
        assert!(!is_json_document(&unclosed));
    }

    #[test]
    fn agrees_with_serde_json_on_ordinary_documents() {
        for text in ["{\"a\":[1,2.5,\"x\"]}", "[{}]", "\"a\\\"b\"", "[-1e-7]"] {
            assert_eq!(
                is_json_document(text),
                serde_json::from_str::<serde_json::Value>(text).is_ok()
            );
        }
    }
}
