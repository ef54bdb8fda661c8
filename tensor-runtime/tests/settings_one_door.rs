//! The environment has one door (`tensor_runtime::settings`): no other library source reads
//! a variable, and every variable of the library's own is a row of `docs/environment.md`,
//! every foreign one named there.

use std::fs;
use std::path::{Path, PathBuf};
use tensor_runtime::settings::{COMPILER, FOREIGN, OURS};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("a source folder") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The part of a source file before its `#[cfg(test)]` module, if any.
fn library_part(text: &str) -> &str {
    text.split("#[cfg(test)]").next().unwrap_or(text)
}

#[test]
fn no_library_source_but_settings_reads_the_environment() {
    let root = workspace();
    let mut files = Vec::new();
    rust_files(&root.join("tensor-runtime/src"), &mut files);
    rust_files(&root.join("src"), &mut files);
    let readers: Vec<String> = files
        .iter()
        .filter(|f| !f.ends_with("settings.rs"))
        .filter(|f| {
            let text = fs::read_to_string(f).expect("a readable source");
            let code = library_part(&text);
            code.lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .any(|l| l.contains("env::var(") || l.contains("env::var_os("))
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(
        readers.is_empty(),
        "read the environment through tensor_runtime::settings: {readers:?}"
    );
}

#[test]
fn every_variable_is_in_the_environment_table() {
    let doc = fs::read_to_string(workspace().join("docs/environment.md")).expect("the doc");
    let no_row: Vec<&&str> = OURS
        .iter()
        .filter(|v| !doc.lines().any(|l| l.starts_with(&format!("| `{v}"))))
        .collect();
    assert!(
        no_row.is_empty(),
        "no row in docs/environment.md: {no_row:?}"
    );
    let unnamed: Vec<&&str> = COMPILER
        .iter()
        .chain(FOREIGN)
        .filter(|v| !doc.contains(&format!("`{v}`")))
        .collect();
    assert!(
        unnamed.is_empty(),
        "not named in docs/environment.md: {unnamed:?}"
    );
}
