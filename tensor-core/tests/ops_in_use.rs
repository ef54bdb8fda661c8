//! Every `Op` and every `AxisType` of the IR is used by the compiler: some source file other
//! than the enum's own (`uop/op.rs`) and the validity rules (`uop/spec.rs`) names it, so an
//! op is built by a pass or read by one (the front end, a rule table, the lowering, a renderer,
//! the interpreter). An op that only the spec mentions is dead weight a reader must understand;
//! it joins the enum with the pass that produces it.
//!
//! A source scan: `Op::Name` / `AxisType::Name` outside comments, in the non-test files of
//! `src/` (files named `tests.rs` and the `proptests` folder are left out).
//!
//! Naming is not enough for an `Op`: an op that passes only match on (a `match` arm, a
//! `matches!`, a comparison) is never made, so every arm that handles it is dead code.
//! [`every_op_is_built_by_a_pass`] asks for each op one *value* use in the code of a pass; see
//! [`Uses`] for what counts.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

#[test]
fn every_op_is_produced_or_consumed_by_a_pass() {
    assert_all_used("Op");
}

#[test]
fn every_axis_type_is_produced_or_consumed_by_a_pass() {
    assert_all_used("AxisType");
}

#[test]
fn every_op_is_built_by_a_pass() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let definition = fs::read_to_string(src.join("uop/op.rs")).expect("uop/op.rs");
    let variants = variants_of(&definition, "Op");
    let built: BTreeSet<String> = pass_code(&src)
        .iter()
        .flat_map(|code| code.values("Op"))
        .collect();
    let unbuilt: Vec<&String> = variants.iter().filter(|v| !built.contains(*v)).collect();
    assert!(
        unbuilt.is_empty(),
        "Op variants that passes only match on or compare with, and none builds: {unbuilt:?} \
         (remove them, or add them with the pass that makes them)"
    );
}

/// The rule of [`every_op_is_built_by_a_pass`] on small pieces of code, both ways.
#[test]
fn the_scan_tells_values_from_patterns() {
    let built = |text: &str| Uses::of(text).values("Op").contains("Add");
    for value in [
        "let u = UOp::new(Op::Add, dtype, src, Arg::None);",
        "let u = alu(Op::Add, &[a, b]);",
        "const OPS: [Op; 2] = [Op::Mul, Op::Add];",
        "let op = Op::Add;",
        "let rules = vec![(Op::Mul, 1), (Op::Add, 0)].into_iter();",
        "let inverse = match op { Op::Sub => Op::Add, _ => op };",
        "x => Some(Op::Add),\n y => None,",
        "let s = format!(\"Op::Sub => {}\", op); let b = op.binary(Op::Add);",
    ] {
        assert!(built(value), "a value: {value}");
    }
    for pattern in [
        "match op { Op::Add => 1, _ => 0 }",
        "match op { Op::Mul | Op::Add | Op::Max => 1, _ => 0 }",
        "match (op, arg) { (Op::Add, Arg::None) | (Op::Mul, _) => 1, _ => 0 }",
        "match (op, arg) { (Op::Mul, _) | (Op::Add, Arg::Range { id, .. }) => 1, _ => 0 }",
        "match op { Op::Add if simple(u) => 1, _ => 0 }",
        "match x { Some(Op::Add) => 1, _ => 0 }",
        "let reads = matches!(u.op(), Op::Mul | Op::Add);",
        "if u.op() == Op::Add || Op::Add != u.op() {}",
        "let rule = UPat::op(Op::Add).src(vec![x]); let r2 = UPat::ops(&[Op::Add, Op::Mul]);",
        "// UOp::new(Op::Add, ..)\n/* alu(Op::Add) */ let s = \"alu(Op::Add)\";",
        "let a = ReduceOp::Add; let b = Op::Addr;",
        "#[cfg(test)]\nmod tests {\n fn t() { UOp::new(Op::Add, d, s, a); }\n}",
    ] {
        assert!(!built(pattern), "not a value: {pattern}");
    }
}

fn assert_all_used(enum_name: &str) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let definition = fs::read_to_string(src.join("uop/op.rs")).expect("uop/op.rs");
    let variants = variants_of(&definition, enum_name);
    assert!(
        variants.len() > 3,
        "no variants found for `enum {enum_name}`"
    );
    let sources: Vec<String> = source_files(&src)
        .into_iter()
        .filter(|f| !f.ends_with("uop/op.rs") && !f.ends_with("uop/spec.rs"))
        .map(|f| without_comments(&fs::read_to_string(f).expect("a readable source file")))
        .collect();
    let unused: Vec<&String> = variants
        .iter()
        .filter(|v| {
            !sources
                .iter()
                .any(|s| names(s, &format!("{enum_name}::{v}")))
        })
        .collect();
    assert!(
        unused.is_empty(),
        "{enum_name} variants no pass produces or reads: {unused:?}"
    );
}

/// The variant names of `pub enum <name> { ... }` (unit variants, one per line, some with an
/// explicit discriminant: `Param = 2,`).
fn variants_of(text: &str, name: &str) -> Vec<String> {
    let start = text
        .find(&format!("pub enum {name} {{"))
        .unwrap_or_else(|| panic!("`pub enum {name}` not found"));
    let body = &text[start..];
    let body = &body[body.find('{').unwrap() + 1..body.find("\n}").unwrap()];
    without_comments(body)
        .lines()
        .map(|l| l.trim().trim_end_matches(','))
        .map(|l| l.split('=').next().unwrap_or_default().trim())
        .filter(|l| !l.is_empty())
        .map(|l| {
            let variant = l.chars().all(|c| c.is_ascii_alphanumeric());
            assert!(variant, "`enum {name}`: `{l}` is not a unit variant");
            l.to_string()
        })
        .collect()
}

/// True when `path` occurs in `text` as a whole path (not as a prefix of a longer name).
fn names(text: &str, path: &str) -> bool {
    text.match_indices(path).any(|(at, _)| {
        let next = text[at + path.len()..].chars().next();
        !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

fn without_comments(text: &str) -> String {
    text.lines()
        .map(|l| l.find("//").map_or(l, |at| &l[..at]))
        .collect::<Vec<_>>()
        .join("\n")
}

fn source_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).expect("a readable source directory") {
        let path = entry.expect("a directory entry").path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if path.is_dir() {
            if name != "proptests" {
                files.extend(source_files(&path));
            }
        } else if name.ends_with(".rs") && name != "tests.rs" {
            files.push(path);
        }
    }
    files
}

/// The code of the passes: every source file the other tests scan but the wire format
/// (`uop/wire.rs`, whose table of op codes lists every op as `op.rs` does), each read by
/// [`Uses::of`], less the files of test modules (`#[cfg(test)] mod name;`).
fn pass_code(src: &Path) -> Vec<Uses> {
    let files: Vec<(PathBuf, Uses)> = source_files(src)
        .into_iter()
        .filter(|f| {
            !["uop/op.rs", "uop/spec.rs", "uop/wire.rs"]
                .iter()
                .any(|n| f.ends_with(n))
        })
        .map(|f| {
            let text = fs::read_to_string(&f).expect("a readable source file");
            (f, Uses::of(&text))
        })
        .collect();
    let test_modules: Vec<PathBuf> = files
        .iter()
        .flat_map(|(f, code)| {
            let dir = match f.file_name().and_then(|n| n.to_str()) {
                Some("mod.rs" | "lib.rs") => f.parent().unwrap().to_path_buf(),
                _ => f.with_extension(""),
            };
            code.test_modules.iter().map(move |m| dir.join(m))
        })
        .collect();
    files
        .into_iter()
        .filter(|(f, _)| {
            !test_modules
                .iter()
                .any(|m| f.starts_with(m) || *f == m.with_extension("rs"))
        })
        .map(|(_, code)| code)
        .collect()
}

/// One source file read for the uses of op paths (`Op::Add`). An occurrence is a *value* (the
/// op is built, or passed on to what builds it) unless it is one of these:
///
/// - a pattern: inside `matches!(...)` after its first top-level comma; in a match arm's
///   pattern, i.e. followed, through other `| alternatives`, `(..)` / `{..}` sub-patterns,
///   the rest of an enclosing tuple pattern or an `if` guard, by `=>`; or an argument of a
///   `UPat::` constructor (a rewrite rule's pattern);
/// - a comparison: right before or after `==` or `!=`.
///
/// Comments, string and char literals and `#[cfg(test)]` items are blanked first, so the
/// positions of brackets are those of the code; a bracket's partner is found by counting.
struct Uses {
    /// The file, comments, literals and test items replaced by spaces (ASCII as it was).
    text: Vec<u8>,
    /// For each bracket `( [ {` and `) ] }`, the position of its partner.
    partner: Vec<usize>,
    /// The names of the test modules declared as files: `#[cfg(test)] mod name;`.
    test_modules: Vec<String>,
}

impl Uses {
    fn of(source: &str) -> Uses {
        let text = without_literals(source);
        let partner = partners(&text);
        let mut code = Uses {
            text,
            partner,
            test_modules: Vec::new(),
        };
        code.blank_test_items();
        code
    }

    /// The variants of `enum_name` that occur as a value somewhere in the file: `Add` for a
    /// value `Op::Add`.
    fn values(&self, enum_name: &str) -> BTreeSet<String> {
        let ident = |c: &u8| c.is_ascii_alphanumeric() || *c == b'_';
        let prefix = format!("{enum_name}::");
        let text = &self.text;
        let mut values = BTreeSet::new();
        let mut from = 0;
        while let Some(found) = find(&text[from..], prefix.as_bytes()) {
            let at = from + found;
            let name_at = at + prefix.len();
            let end = name_at + text[name_at..].iter().take_while(|c| ident(c)).count();
            from = end.max(at + 1);
            let whole = at == 0 || !ident(&text[at - 1]);
            if whole && end > name_at && !self.is_pattern(at, end) && !self.is_compared(at, end) {
                values.insert(String::from_utf8_lossy(&text[name_at..end]).into_owned());
            }
        }
        values
    }

    fn is_pattern(&self, at: usize, end: usize) -> bool {
        self.in_pattern_call(at) || self.leads_to_arrow(end)
    }

    /// Inside `matches!(scrutinee, <here>)` or `UPat::name(<here>)`, at any depth short of a
    /// block (`{`).
    fn in_pattern_call(&self, at: usize) -> bool {
        let mut inner = at;
        while let Some(open) = self.enclosing(inner) {
            if self.text[open] == b'{' {
                return false;
            }
            let callee = self.callee(open);
            if callee == "matches!" && self.first_comma(open).is_some_and(|c| c < at) {
                return true;
            }
            if callee.starts_with("UPat::") {
                return true;
            }
            inner = open;
        }
        false
    }

    /// The tokens after an occurrence lead, through pattern syntax only, to a `=>`.
    fn leads_to_arrow(&self, mut i: usize) -> bool {
        const NOT_IN_PATTERNS: &[&str] = &[
            "as", "else", "fn", "for", "in", "let", "loop", "match", "move", "return", "where",
            "while",
        ];
        let text = &self.text;
        loop {
            i = skip_spaces(text, i);
            let rest = &text[i..];
            match rest.first() {
                None => return false,
                Some(_) if rest.starts_with(b"=>") => return true,
                // A sub-pattern: `(a, b)`, `Some(..)`, `[..]`, and a struct's fields
                // `Arg::Range { .. }` (a `{` after anything but a name opens a block).
                Some(b'(' | b'[') => i = self.partner[i] + 1,
                Some(b'{') if self.after_ident(i) => i = self.partner[i] + 1,
                // The end of an enclosing tuple or slice pattern (or of a call's arguments).
                Some(b')' | b']') => i += 1,
                Some(b',') if self.enclosing(i).is_some_and(|o| text[o] != b'{') => i += 1,
                Some(b'|') if !rest.starts_with(b"||") => i += 1,
                Some(b'.') if rest.starts_with(b"..") => i += 2,
                Some(b':') if rest.starts_with(b"::") => i += 2,
                Some(b'&' | b'@') => i += 1,
                Some(c) if c.is_ascii_alphanumeric() || *c == b'_' => {
                    let len = rest
                        .iter()
                        .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
                        .count();
                    let word = std::str::from_utf8(&rest[..len]).unwrap();
                    if word == "if" {
                        return self.guard_reaches_arrow(i + len);
                    }
                    if NOT_IN_PATTERNS.contains(&word) {
                        return false;
                    }
                    i += len;
                }
                Some(_) => return false,
            }
        }
    }

    /// An `if` guard: an expression up to the arm's `=>`, within the enclosing brackets.
    fn guard_reaches_arrow(&self, mut i: usize) -> bool {
        while i < self.text.len() {
            match self.text[i] {
                b'=' if self.text.get(i + 1) == Some(&b'>') => return true,
                b'(' | b'[' | b'{' => i = self.partner[i],
                b')' | b']' | b'}' | b';' => return false,
                _ => {}
            }
            i += 1;
        }
        false
    }

    fn is_compared(&self, at: usize, end: usize) -> bool {
        let before = &self.text[..at];
        let before = &before[..before
            .iter()
            .rposition(|c| *c != b' ' && *c != b'\n')
            .map_or(0, |p| p + 1)];
        let after = &self.text[skip_spaces(&self.text, end)..];
        [b"==", b"!="]
            .iter()
            .any(|op| before.ends_with(*op) || after.starts_with(*op))
    }

    /// The innermost bracket open at `at`.
    fn enclosing(&self, mut at: usize) -> Option<usize> {
        while at > 0 {
            at -= 1;
            match self.text[at] {
                b'(' | b'[' | b'{' => return Some(at),
                b')' | b']' | b'}' => at = self.partner[at],
                _ => {}
            }
        }
        None
    }

    /// The path right before an opening bracket: `UPat::op` for `UPat::op(`, `matches!`.
    fn callee(&self, open: usize) -> &str {
        let before = &self.text[..open];
        let start = before
            .iter()
            .rposition(|c| !(c.is_ascii_alphanumeric() || b"_:!".contains(c)))
            .map_or(0, |p| p + 1);
        std::str::from_utf8(&before[start..]).unwrap_or("")
    }

    fn after_ident(&self, i: usize) -> bool {
        self.text[..i]
            .iter()
            .rev()
            .find(|c| **c != b' ' && **c != b'\n')
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
    }

    /// The first comma directly inside the bracket opened at `open`.
    fn first_comma(&self, open: usize) -> Option<usize> {
        let mut i = open + 1;
        while i < self.partner[open] {
            match self.text[i] {
                b',' => return Some(i),
                b'(' | b'[' | b'{' => i = self.partner[i],
                _ => {}
            }
            i += 1;
        }
        None
    }

    /// Blanks every item under `#[cfg(test)]` (up to its `;` or the end of its `{ }` body), and
    /// notes the names of test modules that live in files of their own.
    fn blank_test_items(&mut self) {
        let mark = b"#[cfg(test)]";
        let mut from = 0;
        while let Some(found) = find(&self.text[from..], mark) {
            let start = from + found;
            let mut i = start + mark.len();
            loop {
                i = skip_spaces(&self.text, i);
                if self.text[i..].starts_with(b"#[") {
                    i = self.partner[i + 1] + 1;
                } else {
                    break;
                }
            }
            let item = i;
            let end = loop {
                match self.text.get(i) {
                    None => break self.text.len(),
                    Some(b';') => {
                        self.note_test_module(item, i);
                        break i + 1;
                    }
                    Some(b'{') => break self.partner[i] + 1,
                    Some(b'(' | b'[') => i = self.partner[i] + 1,
                    Some(_) => i += 1,
                }
            };
            self.text[start..end].iter_mut().for_each(|c| *c = b' ');
            from = end;
        }
    }

    fn note_test_module(&mut self, item: usize, semicolon: usize) {
        let words = std::str::from_utf8(&self.text[item..semicolon]).unwrap();
        let mut words = words.split_whitespace();
        if words.any(|w| w == "mod")
            && let Some(name) = words.next()
        {
            self.test_modules.push(name.to_string());
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn skip_spaces(text: &[u8], mut i: usize) -> usize {
    while text.get(i).is_some_and(|c| c.is_ascii_whitespace()) {
        i += 1;
    }
    i
}

/// `source` with comments, strings (raw ones too) and char literals replaced by spaces, byte
/// for byte; lifetimes (`'a`) stay.
fn without_literals(source: &str) -> Vec<u8> {
    let b = source.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    while i < b.len() {
        let end = literal_end(source, i);
        if end > i {
            out[i..end].iter_mut().for_each(|c| *c = b' ');
            i = end;
        } else {
            i += 1;
        }
    }
    out
}

/// The end of the comment or literal starting at `i`; `i` itself when none starts there.
fn literal_end(source: &str, i: usize) -> usize {
    let b = source.as_bytes();
    let rest = &b[i..];
    let until =
        |from: usize, end: &[u8]| find(&b[from..], end).map_or(b.len(), |p| from + p + end.len());
    let ident = |at: usize| b[at].is_ascii_alphanumeric() || b[at] == b'_';
    // `r"..."` and `br"..."`, not the `r` that ends a name.
    let raw_start = match i {
        0 => true,
        _ if b[i - 1] == b'b' => i < 2 || !ident(i - 2),
        _ => !ident(i - 1),
    };
    if rest.starts_with(b"//") {
        return until(i, b"\n");
    }
    if rest.starts_with(b"/*") {
        return until(i + 2, b"*/");
    }
    if rest.first() == Some(&b'r') && raw_start && matches!(rest.get(1), Some(b'"' | b'#')) {
        let hashes = rest[1..].iter().take_while(|c| **c == b'#').count();
        if rest.get(1 + hashes) == Some(&b'"') {
            let close = [&b"\""[..], &vec![b'#'; hashes]].concat();
            return until(i + 2 + hashes, &close);
        }
    }
    match rest.first() {
        Some(b'"') => {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            (j + 1).min(b.len())
        }
        Some(b'\'') if rest.get(1) == Some(&b'\\') => until(i + 3, b"'"),
        Some(b'\'') => {
            let width = source[i + 1..].chars().next().map_or(0, char::len_utf8);
            if b.get(i + 1 + width) == Some(&b'\'') {
                i + 2 + width
            } else {
                i
            }
        }
        _ => i,
    }
}

/// The partner of every bracket, by counting (the text has no literals left to confuse it).
fn partners(text: &[u8]) -> Vec<usize> {
    let mut partner = vec![usize::MAX; text.len()];
    let mut open = Vec::new();
    for (i, c) in text.iter().enumerate() {
        match c {
            b'(' | b'[' | b'{' => open.push(i),
            b')' | b']' | b'}' => {
                if let Some(o) = open.pop() {
                    partner[o] = i;
                    partner[i] = o;
                }
            }
            _ => {}
        }
    }
    partner
}
