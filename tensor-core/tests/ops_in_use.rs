//! Every `Op` and every `AxisType` of the IR is used by the compiler: some source file other
//! than the enum's own (`uop/op.rs`) and the validity rules (`uop/spec.rs`) names it, so an
//! op is built by a pass or read by one (the front end, a rule table, the lowering, a renderer,
//! the interpreter). An op that only the spec mentions is dead weight a reader must understand;
//! it joins the enum with the pass that produces it.
//!
//! A source scan: `Op::Name` / `AxisType::Name` outside comments, in the non-test files of
//! `src/` (files named `tests.rs` and the `proptests` folder are left out).

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

/// The variant names of `pub enum <name> { ... }` (unit variants, one per line).
fn variants_of(text: &str, name: &str) -> Vec<String> {
    let start = text
        .find(&format!("pub enum {name} {{"))
        .unwrap_or_else(|| panic!("`pub enum {name}` not found"));
    let body = &text[start..];
    let body = &body[body.find('{').unwrap() + 1..body.find("\n}").unwrap()];
    without_comments(body)
        .lines()
        .map(|l| l.trim().trim_end_matches(','))
        .filter(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric()))
        .map(str::to_string)
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
