//! Passwords never leave the process: [`mask`] replaces the password of
//! every URL (`scheme://user:secret@host`) and every `password=` parameter
//! (URL query or key-value connection string) in a text with `***`. Every
//! URL the CLI prints (text, JSON, logs, error details) goes through it.

/// The mask that replaces a password.
pub const MASK: &str = "***";

/// `text` with every password masked.
pub fn mask(text: &str) -> String {
    mask_password_parameters(&mask_userinfo(text))
}

/// `scheme://user:secret@host` → `scheme://user:***@host`, for every URL in
/// `text`.
fn mask_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let authority_end = tail
            .find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace())
            .unwrap_or(tail.len());
        let (authority, after) = tail.split_at(authority_end);
        match authority.rsplit_once('@') {
            Some((userinfo, host)) => match userinfo.split_once(':') {
                Some((user, _)) => out.push_str(&format!("{user}:{MASK}@{host}")),
                None => out.push_str(authority),
            },
            None => out.push_str(authority),
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// `password=secret` → `password=***` (case-insensitive key; the value ends
/// at `&`, whitespace or the end; a quoted key-value value at its quote).
fn mask_password_parameters(text: &str) -> String {
    const KEY: &str = "password=";
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    let mut search = 0;
    while let Some(found) = lower[search..].find(KEY) {
        let start = search + found;
        let value_start = start + KEY.len();
        let value = &text[value_start..];
        let value_len = if let Some(quoted) = value.strip_prefix('\'') {
            quoted.find('\'').map_or(value.len(), |end| end + 2)
        } else {
            value
                .find(|c: char| c == '&' || c.is_whitespace())
                .unwrap_or(value.len())
        };
        out.push_str(&text[last..value_start]);
        if value_len > 0 {
            out.push_str(MASK);
        }
        last = value_start + value_len;
        search = last;
    }
    out.push_str(&text[last..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_passwords_are_masked() {
        assert_eq!(
            mask("postgres://u:secret@h:5432/db?x=1"),
            "postgres://u:***@h:5432/db?x=1"
        );
        assert_eq!(mask("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(
            mask("a postgres://a:b@h/x and postgresql://c:d@k then"),
            "a postgres://a:***@h/x and postgresql://c:***@k then"
        );
        assert_eq!(mask("postgres://u:p@ss@h/db"), "postgres://u:***@h/db");
    }

    #[test]
    fn password_parameters_are_masked() {
        assert_eq!(
            mask("postgres://u@h/db?password=secret&sslmode=disable"),
            "postgres://u@h/db?password=***&sslmode=disable"
        );
        assert_eq!(
            mask("host=h PASSWORD=secret user=u"),
            "host=h PASSWORD=*** user=u"
        );
        assert_eq!(mask("password='a b' user=u"), "password=*** user=u");
        assert_eq!(mask("sqlite:/tmp/x.db"), "sqlite:/tmp/x.db");
    }
}
