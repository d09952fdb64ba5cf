//! Passwords never leave the process. Three layers, each read the way the
//! Postgres driver reads a connection string (`tokio-postgres`, like libpq):
//!
//! - [`mask_url`]: one whole URL, exactly as the driver splits it. The
//!   credentials run from `://` to the *first* `@` anywhere after it (a
//!   password may hold `/ ? # :` and spaces); the password is everything
//!   after the first `:` in them. Every query parameter whose
//!   (percent-decoded) key contains `password` is masked. Every URL the
//!   CLI prints of its own (`status`, `demo`, logs) goes through it.
//! - [`mask`]: any text (driver messages, error details, log lines):
//!   every `scheme://user:secret@` by the same first-`@` rule (and up to a
//!   later raw `@` before the host ends, the form `user:p@ss@host`),
//!   every `…password…=` parameter — in a URL query up to `&` or the end of
//!   the line, as a key-value setting (`password = 'a b'`) by its quoting
//!   and backslash escapes — and every password [`remember`]ed.
//! - [`remember`]: the passwords of the URL this process was given (as
//!   written and percent-decoded) are masked wherever they occur in
//!   [`mask`]ed text, whatever form the text has.
//!
//! A password shorter than [`MIN_REMEMBERED`] characters is masked where
//! it stands as a password, not elsewhere (masking every `ab` of a text
//! would make it unreadable).

use std::sync::Mutex;

/// The mask that replaces a password.
pub const MASK: &str = "***";

/// The shortest password [`remember`] keeps.
pub const MIN_REMEMBERED: usize = 4;

/// The passwords of the URLs this process was given.
static REMEMBERED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Remembers the passwords of `url` (a `--db` value), so that [`mask`]
/// hides them in any text.
pub fn remember(url: &str) {
    let mut found = passwords_of(url);
    found.retain(|p| p.chars().count() >= MIN_REMEMBERED);
    if found.is_empty() {
        return;
    }
    let mut known = REMEMBERED.lock().unwrap_or_else(|e| e.into_inner());
    for password in found {
        if !known.contains(&password) {
            known.push(password);
        }
    }
    // Longest first: a password that contains another is masked whole.
    known.sort_by_key(|p| std::cmp::Reverse(p.len()));
}

/// `text` with every password masked.
pub fn mask(text: &str) -> String {
    let known = REMEMBERED.lock().unwrap_or_else(|e| e.into_inner()).clone();
    mask_with(text, &known)
}

/// [`mask`] with a given list of remembered passwords.
fn mask_with(text: &str, known: &[String]) -> String {
    let mut text = text.to_owned();
    for password in known {
        if text.contains(password.as_str()) {
            text = text.replace(password.as_str(), MASK);
        }
    }
    mask_parameters(&mask_userinfo(&text))
}

/// One URL as the driver reads it, its password and every password
/// parameter masked. A text without `://` is masked as any text.
pub fn mask_url(url: &str) -> String {
    let Some(start) = url.find("://").map(|i| i + 3) else {
        return mask(url);
    };
    let (head, rest) = url.split_at(start);
    let mut out = head.to_owned();
    let after = match credentials(rest) {
        Some(creds) => {
            out.push_str(&masked_credentials(creds.user, creds.password.is_some()));
            &rest[creds.end..]
        }
        None => rest,
    };
    let (base, query) = match after.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (after, None),
    };
    out.push_str(base);
    if let Some(query) = query {
        out.push('?');
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((key, _)) if is_password_key(key) => format!("{key}={MASK}"),
                _ => pair.to_owned(),
            })
            .collect();
        out.push_str(&pairs.join("&"));
    }
    out
}

/// The credentials of the URL text after `://`.
struct Credentials<'a> {
    user: &'a str,
    password: Option<&'a str>,
    /// Where the host begins (after the `@` that ends the credentials).
    end: usize,
}

/// The driver's split: the credentials end at the first `@`. A raw `@`
/// further on, before the host ends (`/`, `?`, `#`, whitespace), is taken
/// as part of the password too: `user:p@ss@host` is a password with an
/// unencoded `@`, which the CLI refuses but must not print either.
fn credentials(rest: &str) -> Option<Credentials<'_>> {
    let first = rest.find('@')?;
    let host_end = rest[first + 1..]
        .find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace())
        .map_or(rest.len(), |i| first + 1 + i);
    let at = rest[first + 1..host_end]
        .rfind('@')
        .map_or(first, |i| first + 1 + i);
    let creds = &rest[..first];
    let (user, password) = match creds.split_once(':') {
        Some((user, _)) => (user, Some(&rest[user.len() + 1..at])),
        None => (creds, None),
    };
    Some(Credentials {
        user,
        password,
        end: at + 1,
    })
}

fn masked_credentials(user: &str, has_password: bool) -> String {
    if has_password {
        format!("{user}:{MASK}@")
    } else {
        format!("{user}@")
    }
}

/// `scheme://user:secret@host` → `scheme://user:***@host`, for every URL
/// in `text`.
fn mask_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        match credentials(tail) {
            Some(creds) if creds.password.is_some() => {
                out.push_str(&masked_credentials(creds.user, true));
                rest = &tail[creds.end..];
            }
            _ => rest = tail,
        }
    }
    out.push_str(rest);
    out
}

/// Whether a parameter key (percent-decoded, any case) names a password
/// (`password`, `sslpassword`, `pass%77ord`).
fn is_password_key(key: &str) -> bool {
    let decoded = percent_decode_lossy(key.trim());
    decoded.to_ascii_lowercase().contains("password")
}

/// Every `key=value` whose key names a password, value masked: after `?`
/// or `&` (a URL query) the value runs to the next `&` or the end of the
/// line; otherwise (a key-value connection string) it is one quoted
/// (`'…'`) or unquoted value with backslash escapes, as the driver reads
/// it. Whitespace around `=` is allowed, as the driver allows it.
fn mask_parameters(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'=' {
            i += 1;
            continue;
        }
        let key_end = text[..i].trim_end().len();
        let key_start = text[..key_end]
            .char_indices()
            .rev()
            .find(|&(_, c)| c.is_whitespace() || matches!(c, '?' | '&' | '=' | ';' | ','))
            .map_or(0, |(p, c)| p + c.len_utf8());
        let key = &text[key_start..key_end];
        if key.is_empty() || !is_password_key(key) {
            i += 1;
            continue;
        }
        let in_query = text[..key_start].ends_with(['?', '&']);
        let value_start = i + 1 + (text[i + 1..].len() - text[i + 1..].trim_start().len());
        let value_end = if in_query {
            text[i + 1..]
                .find(['&', '\n'])
                .map_or(text.len(), |p| i + 1 + p)
        } else {
            value_start + key_value_len(&text[value_start..])
        };
        let value_start = if in_query { i + 1 } else { value_start };
        out.push_str(&text[copied..value_start]);
        if value_end > value_start {
            out.push_str(MASK);
        }
        copied = value_end;
        i = value_end.max(i + 1);
    }
    out.push_str(&text[copied..]);
    out
}

/// The length of one key-value setting's value at the start of `text`:
/// `'…'` with `\` escaping the next character, or up to whitespace with
/// the same escapes.
fn key_value_len(text: &str) -> usize {
    let mut chars = text.char_indices();
    let quoted = text.starts_with('\'');
    if quoted {
        chars.next();
    }
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '\'' if quoted => return i + 1,
            c if !quoted && c.is_whitespace() => return i,
            _ => {}
        }
    }
    text.len()
}

/// The passwords a URL or connection string carries, as written and
/// percent-decoded: the userinfo password and every password parameter.
fn passwords_of(url: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut add = |raw: &str| {
        for form in [raw.to_owned(), percent_decode_lossy(raw)] {
            if !form.is_empty() && !found.contains(&form) {
                found.push(form);
            }
        }
    };
    let mut query = None;
    if let Some(start) = url.find("://").map(|i| i + 3) {
        let rest = &url[start..];
        let after = match credentials(rest) {
            Some(creds) => {
                if let Some(password) = creds.password {
                    add(password);
                }
                &rest[creds.end..]
            }
            None => rest,
        };
        query = after.split_once('?').map(|(_, q)| q);
    }
    for pair in query.unwrap_or_default().split('&') {
        if let Some((key, value)) = pair.split_once('=') {
            if is_password_key(key) {
                add(value);
            }
        }
    }
    found
}

/// `%XX` decoded (an invalid escape kept as written), invalid UTF-8 replaced.
fn percent_decode_lossy(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = (bytes[i] == b'%')
            .then(|| text.get(i + 1..i + 3))
            .flatten()
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match hex {
            Some(byte) => {
                out.push(byte);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// [`mask`] without the process's remembered passwords.
    fn structural(text: &str) -> String {
        mask_with(text, &[])
    }

    #[test]
    fn userinfo_passwords_are_masked() {
        assert_eq!(
            structural("postgres://u:secret@h:5432/db?x=1"),
            "postgres://u:***@h:5432/db?x=1"
        );
        assert_eq!(structural("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(
            structural("a postgres://a:b@h/x and postgresql://c:d@k then"),
            "a postgres://a:***@h/x and postgresql://c:***@k then"
        );
        assert_eq!(
            structural("postgres://u:p@ss@h/db"),
            "postgres://u:***@h/db"
        );
        for url in [
            "postgres://u:pa/ss@h/db",
            "postgres://u:pa#ss@h/db",
            "postgres://u:pa ss@h/db",
            "postgres://u:pa?ss@h/db",
            "postgres://u:p%2Fss@h/db",
        ] {
            assert_eq!(structural(url), "postgres://u:***@h/db", "{url}");
            assert_eq!(mask_url(url), "postgres://u:***@h/db", "{url}");
        }
    }

    #[test]
    fn password_parameters_are_masked() {
        assert_eq!(
            structural("postgres://u@h/db?password=secret&sslmode=disable"),
            "postgres://u@h/db?password=***&sslmode=disable"
        );
        assert_eq!(
            structural("host=h PASSWORD=secret user=u"),
            "host=h PASSWORD=*** user=u"
        );
        assert_eq!(structural("password='a b' user=u"), "password=*** user=u");
        assert_eq!(
            structural(r"password='a\' b' user=u"),
            "password=*** user=u"
        );
        assert_eq!(structural(r"password=a\ b user=u"), "password=*** user=u");
        assert_eq!(
            structural("host=h password = 'x y' user=u"),
            "host=h password = *** user=u"
        );
        assert_eq!(
            structural("postgres://h/db?pass%77ord=a b#c&x=1"),
            "postgres://h/db?pass%77ord=***&x=1"
        );
        assert_eq!(structural("sqlite:/tmp/x.db"), "sqlite:/tmp/x.db");
        assert_eq!(
            mask_url("postgres://h/db?sslpassword=k&password=a%26b&x=1"),
            "postgres://h/db?sslpassword=***&password=***&x=1"
        );
    }

    #[test]
    fn a_key_after_wide_whitespace_is_found() {
        assert_eq!(
            structural("a\u{2028}password=x\u{a0}password=y z"),
            "a\u{2028}password=***\u{a0}password=*** z"
        );
    }

    #[test]
    fn remembered_passwords_are_masked_in_any_form() {
        let known = passwords_of("postgres://u:s%2F3cr%20t@h/db?password=k3y!");
        assert_eq!(known, ["s%2F3cr%20t", "s/3cr t", "k3y!"]);
        assert_eq!(
            mask_with("auth for s/3cr t failed; k3y! too", &known),
            "auth for *** failed; *** too"
        );
    }

    /// Characters a password may hold that a URL or a connection string
    /// gives a meaning to.
    const HOSTILE: &[char] = &[
        '/', '#', '?', ' ', ':', '@', '&', '=', '%', '\'', '\\', '+', ';', ',', '[', ']', '!', '$',
        '*', '"', '\t', 'é', 'a', 'Z', '0', '9', '\u{a0}', '\u{2028}',
    ];

    fn password() -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(HOSTILE), 6..24)
            .prop_map(|chars| chars.into_iter().collect::<String>())
            // A password the masked text could show by accident is not one
            // the test can judge (`***` itself, or nothing but spaces).
            .prop_filter("distinguishable", |p| {
                !p.trim().is_empty() && !MASK.contains(p.as_str()) && !p.contains(MASK)
            })
    }

    fn encode(password: &str) -> String {
        password
            .bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() {
                    char::from(b).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect()
    }

    fn quote(password: &str) -> String {
        let escaped: String = password
            .chars()
            .flat_map(|c| match c {
                '\'' | '\\' => vec!['\\', c],
                c => vec![c],
            })
            .collect();
        format!("'{escaped}'")
    }

    proptest! {
        /// However a password is written where the driver accepts it — raw
        /// or percent-encoded in the userinfo, raw or encoded in a query
        /// parameter, quoted in a key-value string — no masked rendering
        /// holds it, structurally (without remembering it) or remembered.
        #[test]
        fn no_rendering_holds_the_password(password in password()) {
            let encoded = encode(&password);
            let mut forms = vec![
                format!("postgres://app:{encoded}@db.example:5432/x?sslmode=disable"),
                format!("postgres://app@db.example/x?password={encoded}&connect_timeout=10"),
                format!("postgres://app@db.example/x?a=1&password={encoded}"),
                format!("host=db password={} user=app", quote(&password)),
            ];
            // Raw forms the driver reads as the whole password.
            if !password.contains('@') {
                forms.push(format!("postgresql://app:{password}@db.example/x"));
            }
            if !password.contains('&') && !password.contains('\n') {
                forms.push(format!("postgres://app@db.example/x?password={password}"));
                forms.push(format!("postgres://app@db.example/x?password={password}&sslmode=disable"));
            }
            let decoded = percent_decode_lossy(&encoded);
            prop_assert_eq!(&decoded, &password);
            for form in &forms {
                let known = passwords_of(form);
                let mut shown = vec![
                    structural(form),
                    structural(&format!("error: cannot reach {form}: refused")),
                ];
                if form.starts_with("postgres") {
                    shown.push(mask_url(form));
                    // Remembered: each form it was given in, anywhere in a text.
                    let given = if form.contains(encoded.as_str()) { &encoded } else { &password };
                    shown.push(mask_with(&format!("{form} / {password} / {given}"), &known));
                }
                for shown in shown {
                    prop_assert!(!shown.contains(password.as_str()), "{form:?} → {shown:?}");
                    prop_assert!(
                        !form.contains(encoded.as_str()) || !shown.contains(encoded.as_str()),
                        "{form:?} → {shown:?}"
                    );
                }
            }
        }
    }
}
