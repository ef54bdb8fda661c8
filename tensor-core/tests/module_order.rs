//! The modules of `tensor-core` import only from modules below them in the pipeline order
//! written in the README ("How it is built"):
//!
//! `uop` < `rewrite` < `symbolic` < `tensor` < `nn` < `transform` < `optim` < `dp` < `schedule` <
//! `codegen` < `render` < `interp`
//!
//! A source scan: every `crate::<module>` path (also inside `use crate::{...}` groups) in the
//! non-test code of `src/<module>/**.rs` must name the module itself or one below it. Test code
//! is left out — a module declared `#[cfg(test)] mod name;` (its file) and an inline
//! `#[cfg(test)] mod name { ... }` — because tests may use any module as an oracle (the
//! scheduler's differential tests run the interpreter). Comments are left out too.

use std::fs;
use std::path::{Path, PathBuf};

/// The pipeline order, lowest first (the README's and ARCHITECTURE.md's).
const ORDER: &[&str] = &[
    "uop",
    "rewrite",
    "symbolic",
    "tensor",
    "nn",
    "transform",
    "optim",
    "dp",
    "schedule",
    "codegen",
    "render",
    "interp",
];

#[test]
fn no_module_imports_from_a_module_above_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut violations = Vec::new();
    for (rank, module) in ORDER.iter().enumerate() {
        let dir = src.join(module);
        assert!(dir.is_dir(), "{} is not a module directory", dir.display());
        for file in non_test_files(&dir) {
            let text = fs::read_to_string(&file).expect("a readable source file");
            for (line_no, used) in crate_paths(&without_tests(&text)) {
                let Some(used_rank) = ORDER.iter().position(|m| *m == used) else {
                    violations.push(format!(
                        "{}:{line_no}: `crate::{used}` is not a module of the order",
                        file.display()
                    ));
                    continue;
                };
                if used_rank > rank {
                    violations.push(format!(
                        "{}:{line_no}: `{module}` imports `crate::{used}`, which is above it",
                        file.display()
                    ));
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "imports against the pipeline order {ORDER:?}:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_scan_sees_imports_and_skips_tests_and_comments() {
    let text = "use crate::uop::UOp;\nuse crate::{rewrite::X, schedule};\n// crate::render\n\
                #[cfg(test)]\nmod tests {\n    use crate::interp;\n    fn f() { {} }\n}\n\
                fn g() -> crate::codegen::Kernel { todo!() }\n";
    let used: Vec<String> = crate_paths(&without_tests(text))
        .into_iter()
        .map(|(_, m)| m)
        .collect();
    assert_eq!(used, ["uop", "rewrite", "schedule", "codegen"]);
}

#[test]
fn the_readme_writes_the_same_order() {
    let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    let text = fs::read_to_string(readme).expect("the README");
    let written = ORDER
        .iter()
        .map(|m| format!("`{m}`"))
        .collect::<Vec<_>>()
        .join(" < ");
    assert!(
        text.contains(&written),
        "the README should write the pipeline order as {written}"
    );
}

/// The `.rs` files under `dir`, without the files of modules declared `#[cfg(test)]`.
fn non_test_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .expect("a readable directory")
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    let test_modules: Vec<String> = entries
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .flat_map(|p| test_module_names(&fs::read_to_string(p).expect("a readable file")))
        .collect();
    for path in entries {
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_string();
        if test_modules.contains(&stem) {
            continue;
        }
        if path.is_dir() {
            files.extend(non_test_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// The names of the modules a file declares as `#[cfg(test)] mod name;`.
fn test_module_names(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let mut names = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if *line != "#[cfg(test)]" {
            continue;
        }
        let declared = lines.get(i + 1).and_then(|l| module_declaration(l));
        if let Some(name) = declared.and_then(|rest| rest.strip_suffix(';')) {
            names.push(name.trim().to_string());
        }
    }
    names
}

/// The rest of a `mod` declaration after `mod ` (`name;` or `name {`), with any visibility.
fn module_declaration(line: &str) -> Option<&str> {
    let line = match line.strip_prefix("pub") {
        Some(rest) if rest.starts_with('(') => rest.split_once(')')?.1.trim_start(),
        Some(rest) => rest.trim_start(),
        None => line,
    };
    line.strip_prefix("mod ")
}

/// The text with comments and inline `#[cfg(test)] mod name { ... }` blocks blanked (lines
/// kept, so line numbers still match the file).
fn without_tests(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::with_capacity(lines.len());
    let mut depth: Option<i64> = None;
    for (i, line) in lines.iter().enumerate() {
        let code = line.split("//").next().unwrap_or_default();
        if let Some(d) = depth.as_mut() {
            *d += brace_balance(code);
            if *d <= 0 {
                depth = None;
            }
            out.push("");
            continue;
        }
        let inline_test_module = line.trim() == "#[cfg(test)]"
            && lines
                .get(i + 1)
                .and_then(|l| module_declaration(l.trim()))
                .is_some_and(|rest| rest.trim_end().ends_with('{'));
        if inline_test_module {
            depth = Some(0);
            out.push("");
            continue;
        }
        out.push(code);
    }
    out.join("\n")
}

fn brace_balance(code: &str) -> i64 {
    code.chars()
        .map(|c| match c {
            '{' => 1,
            '}' => -1,
            _ => 0,
        })
        .sum()
}

/// Each module named by a `crate::` path, with its line number (1-based): `crate::name` and
/// the first segment of each item of a `crate::{...}` group.
fn crate_paths(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            let before = rest[..at].chars().next_back();
            rest = &rest[at + "crate::".len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue; // `tensor_crate::`, not a path of this crate
            }
            if let Some(group) = rest.strip_prefix('{') {
                let inner = group.split('}').next().unwrap_or_default();
                for item in inner.split(',') {
                    let name = identifier(item.trim());
                    if !name.is_empty() && name != "self" {
                        found.push((i + 1, name));
                    }
                }
            } else {
                let name = identifier(rest);
                if !name.is_empty() {
                    found.push((i + 1, name));
                }
            }
        }
    }
    found
}

fn identifier(s: &str) -> String {
    s.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}
