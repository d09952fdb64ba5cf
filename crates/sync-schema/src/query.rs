//! Registered (authoritative) query preparation (`storage-contract.md`
//! §4.13): pure rewriting of SQLite-family positional SQL so that every
//! reference to a synced table reads only the bound partition's rows.

use std::collections::BTreeSet;

use sync_core::{
    AuthoritativeQueryRequest, CompiledSchema, CompiledTable, Error, ErrorCode, Result, SqlValue,
};

use crate::dialect::{Dialect, INTERNAL_COLUMNS};
use crate::identifiers::is_reserved_name;

/// A query ready to run: the rewritten SQL with the dialect's positional
/// placeholders and the expanded parameter list.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedQuery {
    /// The SQL text (`?` on SQLite, `$1, $2, …` on Postgres).
    pub sql: String,
    /// Parameters in placeholder order; the partition at every rewritten
    /// table reference.
    pub params: Vec<SqlValue>,
    /// The compiled names of the referenced tables, in order of first reference.
    pub tables: Vec<String>,
}

/// Keywords that never start an alias after a table reference.
const NOT_ALIASES: [&str; 20] = [
    "ON",
    "USING",
    "WHERE",
    "GROUP",
    "ORDER",
    "LIMIT",
    "OFFSET",
    "HAVING",
    "WINDOW",
    "UNION",
    "EXCEPT",
    "INTERSECT",
    "JOIN",
    "INNER",
    "LEFT",
    "RIGHT",
    "FULL",
    "CROSS",
    "NATURAL",
    "OUTER",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Space,
    Comment,
    Literal,
    Word,
    /// `"…"` (the only quoted form accepted in a relation position).
    DoubleQuoted,
    /// `` `…` `` or `[…]`.
    OtherQuoted,
    /// `?` (`None`) or `?N`; `Some(usize::MAX)` when `N` overflows.
    Bind(Option<usize>),
    Semicolon,
    Dot,
    OpenParen,
    Other,
}

#[derive(Debug)]
struct Token<'s> {
    kind: Kind,
    text: &'s str,
}

impl Token<'_> {
    /// The unescaped name of a bare or quoted identifier token.
    fn name(&self) -> Option<String> {
        let inner = |t: &str| t.get(1..t.len().saturating_sub(1)).unwrap_or("").to_owned();
        match self.kind {
            Kind::Word => Some(self.text.to_owned()),
            Kind::DoubleQuoted => Some(inner(self.text).replace("\"\"", "\"")),
            Kind::OtherQuoted if self.text.starts_with('`') => {
                Some(inner(self.text).replace("``", "`"))
            }
            Kind::OtherQuoted => Some(inner(self.text)),
            _ => None,
        }
    }

    fn is_keyword(&self, keyword: &str) -> bool {
        self.kind == Kind::Word && self.text.eq_ignore_ascii_case(keyword)
    }

    fn is_significant(&self) -> bool {
        !matches!(self.kind, Kind::Space | Kind::Comment)
    }
}

fn rejected(reason: &str) -> Error {
    Error::new(ErrorCode::QueryRejected).detail("reason", reason)
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

/// End (exclusive) of a quoted span opened at `start`; `doubled` enables the
/// doubled-closer escape.
fn close_quoted(bytes: &[u8], start: usize, close: u8, doubled: bool) -> Result<usize> {
    let mut i = start + 1;
    loop {
        let offset = bytes[i..]
            .iter()
            .position(|&b| b == close)
            .ok_or_else(|| rejected("unterminated_literal"))?;
        let at = i + offset;
        if doubled && bytes.get(at + 1) == Some(&close) {
            i = at + 2;
        } else {
            return Ok(at + 1);
        }
    }
}

/// Splits the SQL into tokens; protected spans (literals, comments, quoted
/// identifiers) are single tokens. Fails on an unterminated one.
fn tokenize(sql: &str) -> Result<Vec<Token<'_>>> {
    let bytes = sql.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        let next = bytes.get(i + 1).copied();
        let kind = match bytes[i] {
            b'\'' => {
                i = close_quoted(bytes, i, b'\'', true)?;
                Kind::Literal
            }
            b'"' => {
                i = close_quoted(bytes, i, b'"', true)?;
                Kind::DoubleQuoted
            }
            b'`' => {
                i = close_quoted(bytes, i, b'`', true)?;
                Kind::OtherQuoted
            }
            b'[' => {
                i = close_quoted(bytes, i, b']', false)?;
                Kind::OtherQuoted
            }
            b'-' if next == Some(b'-') => {
                i = bytes[i..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(bytes.len(), |p| i + p);
                Kind::Comment
            }
            b'/' if next == Some(b'*') => {
                let end = sql[i + 2..]
                    .find("*/")
                    .ok_or_else(|| rejected("unterminated_literal"))?;
                i += 2 + end + 2;
                Kind::Comment
            }
            b'?' => {
                i += 1;
                let digits = bytes[i..].iter().take_while(|b| b.is_ascii_digit()).count();
                let number =
                    (digits > 0).then(|| sql[i..i + digits].parse::<usize>().unwrap_or(usize::MAX));
                i += digits;
                Kind::Bind(number)
            }
            b';' => {
                i += 1;
                Kind::Semicolon
            }
            b'.' => {
                i += 1;
                Kind::Dot
            }
            b'(' => {
                i += 1;
                Kind::OpenParen
            }
            b if b.is_ascii_whitespace() => {
                i += bytes[i..]
                    .iter()
                    .take_while(|b| b.is_ascii_whitespace())
                    .count();
                Kind::Space
            }
            b if is_word_byte(b) => {
                i += bytes[i..].iter().take_while(|&&b| is_word_byte(b)).count();
                Kind::Word
            }
            _ => {
                i += 1;
                Kind::Other
            }
        };
        tokens.push(Token {
            kind,
            text: &sql[start..i],
        });
    }
    Ok(tokens)
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
fn is_bare_identifier(text: &str) -> bool {
    let mut bytes = text.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn find_table<'c>(schema: &'c CompiledSchema, name: &str) -> Option<&'c CompiledTable> {
    schema
        .tables
        .iter()
        .find(|t| t.name.eq_ignore_ascii_case(name))
}

/// One resolved table reference.
struct Reference<'c> {
    token: usize,
    table: &'c CompiledTable,
    /// The alias token and whether `AS` was written before it.
    alias: Option<(usize, bool)>,
}

/// Prepares a registered query for `partition` against the ensured schema.
///
/// `sql` is SQLite-family positional SQL, `params` its parameters, `tables`
/// the declared dependency set. Failures are `sync.storage.query_rejected`
/// with `details.reason`: `unterminated_literal`, `unsupported_syntax` (a
/// lexical form the dialects read differently), `multiple_statements`,
/// `unsupported_syntax` (not one read statement), `reserved_reference`
/// (including system catalogs and SQL-running functions),
/// `unsupported_table_reference`, `table_metadata_mismatch`,
/// `non_materialized_table`, `bind_mismatch` — in that order of precedence. (`unsupported_result_type` is decided by the
/// Postgres dialect when it sees the result columns.)
pub fn prepare_query(
    schema: &CompiledSchema,
    dialect: Dialect,
    partition: &str,
    sql: &str,
    params: &[SqlValue],
    tables: &[String],
) -> Result<PreparedQuery> {
    let rules = dialect.query_rules();
    let tokens = tokenize(sql)?;
    if let Some(construct) = dialect_specific_construct(&tokens, rules) {
        return Err(rejected("unsupported_syntax").detail("construct", construct));
    }
    if tokens.iter().any(|t| t.kind == Kind::Semicolon) {
        return Err(rejected("multiple_statements"));
    }
    if let Some(construct) = non_query_construct(&tokens) {
        return Err(rejected("unsupported_syntax").detail("construct", construct));
    }
    if let Some(name) = tokens
        .iter()
        .filter_map(Token::name)
        .find(|name| is_reserved_name(name) || rules.is_system_name(name))
    {
        return Err(rejected("reserved_reference").detail("identifier", name));
    }
    let references = resolve_references(schema, &tokens)?;
    check_stray_tokens(schema, &tokens, &references)?;
    let referenced = check_metadata(&references, tables)?;
    if let Some(r) = references.iter().find(|r| !r.table.materialize) {
        return Err(rejected("non_materialized_table").detail("table", &r.table.name));
    }
    let bind_values = resolve_binds(&tokens, params)?;
    Ok(render(
        dialect,
        partition,
        &tokens,
        &references,
        bind_values,
        referenced,
    ))
}

/// [`prepare_query`] for an [`AuthoritativeQueryRequest`].
pub fn prepare_request(
    schema: &CompiledSchema,
    dialect: Dialect,
    partition: &str,
    request: &AuthoritativeQueryRequest,
) -> Result<PreparedQuery> {
    prepare_query(
        schema,
        dialect,
        partition,
        &request.sql,
        &request.params,
        &request.tables,
    )
}

/// A lexical form some database reads differently from the mask of
/// `tokenize` (which follows the SQLite family), so that text the mask
/// takes for a literal or a comment would run as SQL there, or a quoted name
/// would escape the reserved-name rule **(decision)**. A query containing
/// one of the constructs of [`SqlDialect::query_rules`] is refused with
/// `unsupported_syntax` and `details.construct` = [`Construct::as_str`].
///
/// [`SqlDialect::query_rules`]: crate::SqlDialect::query_rules
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Construct {
    /// `$$…$$`, `$tag$…$tag$` dollar quotes and `$n` parameters.
    DollarQuote,
    /// `E'…'` escape strings (`\'` ends no literal there).
    EscapeString,
    /// `U&"…"` / `U&'…'` Unicode escapes (`U&"\0073ync_commits"` names `sync_commits`).
    UnicodeEscape,
    /// Nested block comments (`/* /* */ … */`).
    NestedComment,
    /// A backslash inside a string literal (a database that reads `\'` as
    /// an escaped quote ends the literal elsewhere than the mask).
    BackslashInLiteral,
    /// `/*! … */` or `/*M! … */`: a comment to the mask that a database
    /// runs as SQL.
    ExecutableComment,
    /// `#`: a character to the mask that a database reads as the start of a
    /// comment to the end of the line (a `'` after it then opens nothing).
    HashComment,
    /// `--` not followed by a space or a control character: a comment to
    /// the mask, two minus signs to a database that requires the space
    /// (`SELECT 1 --1` is 2 there).
    DashDashWithoutSpace,
    /// `@name` / `@@name`: a user or system variable, which reads or
    /// changes session state of a pooled connection.
    SessionVariable,
}

impl Construct {
    /// The `details.construct` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DollarQuote => "dollar_quote",
            Self::EscapeString => "escape_string",
            Self::UnicodeEscape => "unicode_escape",
            Self::NestedComment => "nested_comment",
            Self::BackslashInLiteral => "backslash_in_literal",
            Self::ExecutableComment => "executable_comment",
            Self::HashComment => "hash_comment",
            Self::DashDashWithoutSpace => "dash_dash_without_space",
            Self::SessionVariable => "session_variable",
        }
    }
}

/// What the registered-query mask refuses on a dialect
/// ([`crate::SqlDialect::query_rules`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryRules {
    /// Lexical constructs refused with `unsupported_syntax`.
    pub constructs: &'static [Construct],
    /// Name prefixes refused with `reserved_reference` (lower case, compared
    /// ASCII case-insensitively).
    pub system_prefixes: &'static [&'static str],
    /// Whole names refused with `reserved_reference` (lower case).
    pub system_names: &'static [&'static str],
}

impl QueryRules {
    /// Whether `name` is one of the system names or starts with a system prefix.
    pub fn is_system_name(&self, name: &str) -> bool {
        let lower = name.to_ascii_lowercase();
        self.system_prefixes.iter().any(|p| lower.starts_with(p))
            || self.system_names.contains(&lower.as_str())
    }
}

/// The rules every built-in dialect applies, so that one registered query
/// is accepted or refused alike on every database **(decision)**: the
/// lexical constructs any built-in database reads differently from the mask,
/// and the names of the databases' own namespaces and of functions that run
/// SQL text, read server files or change session state — a query naming one
/// could read `sync_` tables or other partitions without naming them
/// (`query_to_xml('select … from sync_' || 'commits', …)`), or poison a
/// pooled connection (`set_config('search_path', …)`). A new dialect
/// extends this set (never shrinks it) in its own crate.
pub const PORTABLE_QUERY_RULES: QueryRules = QueryRules {
    constructs: &[
        Construct::DollarQuote,
        Construct::EscapeString,
        Construct::UnicodeEscape,
        Construct::NestedComment,
    ],
    // tidy-allow-names: the portable namespace list names built-in databases' catalogs
    system_prefixes: &[
        "sqlite_",
        "pg_",
        "pragma_",
        "query_to_",
        "table_to_",
        "cursor_to_",
        "schema_to_",
        "database_to_",
        "dblink",
    ],
    system_names: &[
        "information_schema",
        "set_config",
        "current_setting",
        "load_extension",
        "readfile",
        "writefile",
        "edit",
        "fts3_tokenizer",
        "lo_import",
        "lo_export",
        "lo_get",
        "lo_put",
        "lo_open",
        "lo_create",
        "lo_unlink",
        "lo_from_bytea",
        "loread",
        "lowrite",
    ],
    // tidy-allow-names-end
};

fn dialect_specific_construct(tokens: &[Token<'_>], rules: &QueryRules) -> Option<&'static str> {
    let refused = |c: Construct| rules.constructs.contains(&c).then_some(c.as_str());
    tokens.iter().enumerate().find_map(|(i, token)| {
        let previous = i.checked_sub(1).and_then(|p| tokens.get(p));
        match token.kind {
            Kind::Word if token.text.starts_with('$') => refused(Construct::DollarQuote),
            Kind::Literal
                if previous
                    .is_some_and(|p| p.kind == Kind::Word && p.text.eq_ignore_ascii_case("e"))
                    && rules.constructs.contains(&Construct::EscapeString) =>
            {
                refused(Construct::EscapeString)
            }
            Kind::Literal | Kind::DoubleQuoted
                if previous.is_some_and(|p| p.text == "&")
                    && rules.constructs.contains(&Construct::UnicodeEscape) =>
            {
                refused(Construct::UnicodeEscape)
            }
            Kind::Comment if token.text.starts_with("/*") && token.text[2..].contains("/*") => {
                refused(Construct::NestedComment)
            }
            Kind::Literal if token.text.contains('\\') => refused(Construct::BackslashInLiteral),
            Kind::Comment if token.text.starts_with("/*!") || token.text.starts_with("/*M!") => {
                refused(Construct::ExecutableComment)
            }
            Kind::Comment
                if token.text.starts_with("--")
                    && token
                        .text
                        .as_bytes()
                        .get(2)
                        .is_some_and(|b| !b.is_ascii_whitespace() && !b.is_ascii_control()) =>
            {
                refused(Construct::DashDashWithoutSpace)
            }
            Kind::Other if token.text == "#" => refused(Construct::HashComment),
            Kind::Other if token.text == "@" => refused(Construct::SessionVariable),
            _ => None,
        }
    })
}

/// Keywords that make a statement write (or create a table) wherever they
/// stand: a registered query reads **(decision)**.
const WRITE_KEYWORDS: [&str; 5] = ["INSERT", "UPDATE", "DELETE", "MERGE", "INTO"];

/// A registered query is one read statement: it starts (after any `(`) with
/// `SELECT`, `WITH` or `VALUES` and contains no bare write keyword — the
/// transaction variant runs on a writable connection, and a statement that
/// writes or changes the connection must never reach it **(decision)**.
fn non_query_construct(tokens: &[Token<'_>]) -> Option<&'static str> {
    let first = tokens
        .iter()
        .find(|t| t.is_significant() && t.kind != Kind::OpenParen);
    if !first.is_some_and(|t| ["SELECT", "WITH", "VALUES"].iter().any(|k| t.is_keyword(k))) {
        return Some("statement");
    }
    tokens
        .iter()
        .any(|t| WRITE_KEYWORDS.iter().any(|k| t.is_keyword(k)))
        .then_some("write_keyword")
}

/// The relation positions: after `FROM` or `JOIN`, skipping whitespace,
/// comments and `(`, a bare or double-quoted identifier naming a compiled
/// table (ASCII case-insensitively), optionally followed by an alias.
fn resolve_references<'c>(
    schema: &'c CompiledSchema,
    tokens: &[Token<'_>],
) -> Result<Vec<Reference<'c>>> {
    let significant: Vec<usize> = (0..tokens.len())
        .filter(|&i| tokens[i].is_significant())
        .collect();
    let mut references = Vec::new();
    for (k, &i) in significant.iter().enumerate() {
        if !(tokens[i].is_keyword("FROM") || tokens[i].is_keyword("JOIN")) {
            continue;
        }
        let mut m = k + 1;
        while significant
            .get(m)
            .is_some_and(|&j| tokens[j].kind == Kind::OpenParen)
        {
            m += 1;
        }
        let Some(&candidate) = significant.get(m) else {
            continue;
        };
        let token = &tokens[candidate];
        let name = match token.kind {
            Kind::Word if is_bare_identifier(token.text) => token.name(),
            Kind::DoubleQuoted => token.name(),
            _ => None,
        };
        let Some(table) = name.as_deref().and_then(|n| find_table(schema, n)) else {
            continue;
        };
        let after = |offset: usize| significant.get(m + offset).map(|&j| (j, &tokens[j]));
        if after(1).is_some_and(|(_, t)| t.kind == Kind::Dot) {
            // `FROM tasks.x`: a schema-qualified name, never a partition-bound read.
            return Err(rejected("unsupported_table_reference").detail("table", &table.name));
        }
        let alias = match after(1) {
            Some((_, t)) if t.is_keyword("AS") => after(2)
                .filter(|(_, a)| a.name().is_some())
                .map(|(j, _)| (j, true)),
            Some((j, t)) if t.name().is_some() && !is_not_alias(t) => Some((j, false)),
            _ => None,
        };
        references.push(Reference {
            token: candidate,
            table,
            alias,
        });
    }
    Ok(references)
}

fn is_not_alias(token: &Token<'_>) -> bool {
    NOT_ALIASES.iter().any(|k| token.is_keyword(k))
}

/// Any remaining identifier token naming a compiled table that is not a
/// column qualifier (immediately followed by `.`).
fn check_stray_tokens(
    schema: &CompiledSchema,
    tokens: &[Token<'_>],
    references: &[Reference<'_>],
) -> Result<()> {
    let consumed: BTreeSet<usize> = references
        .iter()
        .flat_map(|r| std::iter::once(r.token).chain(r.alias.map(|(a, _)| a)))
        .collect();
    for (i, token) in tokens.iter().enumerate() {
        if consumed.contains(&i) {
            continue;
        }
        let Some(table) = token.name().and_then(|n| find_table(schema, &n)) else {
            continue;
        };
        let qualifier = tokens.get(i + 1).is_some_and(|t| t.kind == Kind::Dot);
        if !qualifier {
            return Err(rejected("unsupported_table_reference").detail("table", &table.name));
        }
    }
    Ok(())
}

/// Referenced tables must equal the declared dependency set; returns the
/// referenced compiled names in order of first reference.
fn check_metadata(references: &[Reference<'_>], tables: &[String]) -> Result<Vec<String>> {
    let mut referenced: Vec<String> = Vec::new();
    for r in references {
        if !referenced.contains(&r.table.name) {
            referenced.push(r.table.name.clone());
        }
    }
    let listed = |name: &str| tables.iter().any(|t| t.eq_ignore_ascii_case(name));
    if let Some(missing) = referenced.iter().find(|name| !listed(name)) {
        return Err(rejected("table_metadata_mismatch").detail("table", missing));
    }
    if let Some(unused) = tables
        .iter()
        .find(|t| !referenced.iter().any(|r| r.eq_ignore_ascii_case(t)))
    {
        return Err(rejected("table_metadata_mismatch").detail("table", unused));
    }
    Ok(referenced)
}

/// The parameter of every bind token, in textual order.
fn resolve_binds(tokens: &[Token<'_>], params: &[SqlValue]) -> Result<Vec<SqlValue>> {
    let mut next = 1usize;
    let mut used = vec![false; params.len()];
    let mut values = Vec::new();
    for token in tokens {
        let Kind::Bind(number) = token.kind else {
            continue;
        };
        let n = number.unwrap_or(next);
        next = next.max(n.saturating_add(1));
        if n == 0 || n > params.len() {
            return Err(rejected("bind_mismatch").detail("bind", n));
        }
        used[n - 1] = true;
        values.push(params[n - 1].clone());
    }
    if let Some(unused) = used.iter().position(|u| !u) {
        return Err(rejected("bind_mismatch").detail("bind", unused + 1));
    }
    Ok(values)
}

enum Piece {
    Text(String),
    Bind(SqlValue),
}

fn render(
    dialect: Dialect,
    partition: &str,
    tokens: &[Token<'_>],
    references: &[Reference<'_>],
    bind_values: Vec<SqlValue>,
    referenced: Vec<String>,
) -> PreparedQuery {
    let mut binds = bind_values.into_iter();
    let mut pieces = Vec::with_capacity(tokens.len());
    for (i, token) in tokens.iter().enumerate() {
        if let Some(r) = references.iter().find(|r| r.token == i) {
            let columns: Vec<String> = r
                .table
                .columns
                .iter()
                .map(|c| dialect.quote_ident(&c.name))
                .collect();
            pieces.push(Piece::Text(format!(
                "(SELECT {} FROM {} WHERE {} = ",
                columns.join(", "),
                dialect.quote_ident(&r.table.name),
                dialect.quote_ident(INTERNAL_COLUMNS[0].name)
            )));
            pieces.push(Piece::Bind(SqlValue::Text(partition.to_owned())));
            pieces.push(Piece::Text(")".to_owned()));
            if r.alias.is_none() {
                pieces.push(Piece::Text(format!(
                    " AS {}",
                    dialect.quote_ident(&r.table.name)
                )));
            }
            continue;
        }
        if references.iter().any(|r| r.alias == Some((i, false))) {
            pieces.push(Piece::Text("AS ".to_owned()));
        }
        match token.kind {
            Kind::Bind(_) => pieces.push(Piece::Bind(binds.next().unwrap_or(SqlValue::Null))),
            _ => pieces.push(Piece::Text(token.text.to_owned())),
        }
    }
    let mut sql = String::new();
    let mut params = Vec::new();
    for piece in pieces {
        match piece {
            Piece::Text(text) => sql.push_str(&text),
            Piece::Bind(value) => {
                params.push(value);
                sql.push_str(&dialect.placeholder(params.len()));
            }
        }
    }
    PreparedQuery {
        sql,
        params,
        tables: referenced,
    }
}
