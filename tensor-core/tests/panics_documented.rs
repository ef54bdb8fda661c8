//! Every public function of the tensor front end (`src/tensor/*.rs`) that can panic says so in
//! a `# Panics` section of its doc (issue #16).
//!
//! A source scan. A function "can panic" when it is `#[track_caller]` (the mark this crate puts
//! on every function that checks a user's arguments, so the panic names the caller's line) or
//! when its body holds a panicking macro or `unwrap`/`expect`. Such a body must also be
//! `#[track_caller]`, so its message points at the user's call rather than at this crate.
//! Functions that only call checked ops with arguments they have already checked (`ravel`,
//! `tanh`) carry neither mark and need no section.

use std::fs;
use std::path::Path;

/// What a body may hold that panics.
const PANICKING: &[&str] = &[
    "panic!",
    "assert!",
    "assert_eq!",
    "assert_ne!",
    "unreachable!",
    "todo!",
    "unimplemented!",
    ".unwrap()",
    ".expect(",
];

/// One `pub fn` as the scan sees it.
struct PubFn {
    name: String,
    line: usize,
    doc: Vec<String>,
    track_caller: bool,
    body: String,
}

#[test]
fn every_public_function_that_can_panic_has_a_panics_section() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/tensor");
    let mut files: Vec<_> = fs::read_dir(&dir)
        .expect("src/tensor")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    files.sort();
    let mut problems = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text = fs::read_to_string(file).expect("a readable source file");
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        for f in public_fns(&text) {
            let direct = PANICKING.iter().any(|p| f.body.contains(p));
            if direct && !f.track_caller {
                problems.push(format!(
                    "{name}:{} `{}` panics without #[track_caller]",
                    f.line, f.name
                ));
            }
            if (direct || f.track_caller) && !has_panics_section(&f.doc) {
                problems.push(format!(
                    "{name}:{} `{}` can panic but its doc has no `# Panics` section",
                    f.line, f.name
                ));
            }
            checked += 1;
        }
    }
    assert!(
        checked > 150,
        "the scan found only {checked} public functions"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A `# Panics` heading followed by at least one line of text.
fn has_panics_section(doc: &[String]) -> bool {
    doc.iter()
        .position(|l| l == "# Panics")
        .is_some_and(|i| doc[i + 1..].iter().any(|l| !l.is_empty()))
}

/// The `pub fn`s of a rustfmt-formatted file, with their doc lines, attributes and bodies.
fn public_fns(text: &str) -> Vec<PubFn> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(rest) = line.trim_start().strip_prefix("pub fn ") else {
            continue;
        };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let mut doc = Vec::new();
        let mut track_caller = false;
        for above in lines[..i].iter().rev().map(|l| l.trim()) {
            if let Some(d) = above.strip_prefix("///") {
                doc.push(d.trim().to_string());
            } else if above.starts_with("#[") {
                track_caller |= above == "#[track_caller]";
            } else {
                break;
            }
        }
        doc.reverse();
        out.push(PubFn {
            name,
            line: i + 1,
            doc,
            track_caller,
            body: body_from(&lines[i..]),
        });
    }
    out
}

/// The lines from a signature to the brace that closes its body.
fn body_from(lines: &[&str]) -> String {
    let mut depth = 0i32;
    let mut opened = false;
    let mut body = String::new();
    for line in lines {
        body.push_str(line);
        body.push('\n');
        for c in line.chars() {
            match c {
                '{' => {
                    depth += 1;
                    opened = true;
                }
                '}' => depth -= 1,
                _ => {}
            }
        }
        if opened && depth <= 0 {
            break;
        }
    }
    body
}
