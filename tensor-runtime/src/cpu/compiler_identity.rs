//! What identifies a C compiler command for the kernel cache, besides the kernel flags: every
//! word of the command (`CC="cc -ffast-math"` or `CC="cc -fsanitize=address"` builds other
//! code than `CC=cc`), the program the first word resolves to (path, size and modification
//! time, after following symbolic links, so two compilers that print the same `--version`
//! are still told apart), its `--version` output, and the environment variables through
//! which gcc and clang find their passes, headers and libraries.
//!
//! An entry built by one compiler command is therefore never loaded by a process that uses
//! another, in either direction.

use std::path::{Path, PathBuf};

/// The identity of the compiler `command` whose `--version` printed `version`: one text that
/// differs whenever the object code may.
pub(super) fn describe(command: &str, version: &str) -> String {
    let mut text = String::from("words:");
    for word in command.split_whitespace() {
        text.push_str(&format!(" {word:?}"));
    }
    let program = command.split_whitespace().next().unwrap_or("cc");
    text.push_str(&format!("\nprogram: {}", program_identity(program)));
    for variable in crate::settings::COMPILER {
        if let Some(value) = crate::settings::var_os(variable) {
            text.push_str(&format!("\n{variable}={value:?}"));
        }
    }
    text.push_str("\nversion: ");
    text.push_str(version);
    text
}

/// Where `program` resolves to, with the size and modification time of that file, or a
/// note that it could not be found (the version query then decides alone).
fn program_identity(program: &str) -> String {
    let Some(path) = resolve(program) else {
        return format!("{program:?} (not resolved)");
    };
    let Ok(meta) = std::fs::metadata(&path) else {
        return format!("{:?} (no metadata)", path.display());
    };
    let modified = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    format!(
        "{:?} {} bytes, modified {modified}",
        path.display(),
        meta.len()
    )
}

/// The file `program` runs, symbolic links followed: a name with a `/` is a path; a bare
/// name is looked up in `$PATH`, as the process spawner does.
pub(super) fn resolve(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Path::new(program).canonicalize().ok();
    }
    let search = crate::settings::var_os("PATH")?;
    std::env::split_paths(&search)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable_file(candidate))
        .and_then(|found| found.canonicalize().ok())
}

#[cfg(unix)]
fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable_file(path: &Path) -> bool {
    path.is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_of_the_command_is_part_of_the_identity() {
        let plain = describe("cc", "gcc 13");
        assert_ne!(plain, describe("cc -ffast-math", "gcc 13"));
        assert_ne!(plain, describe("cc -fsanitize=address", "gcc 13"));
        assert_ne!(describe("cc -O1 -O2", "v"), describe("cc -O2 -O1", "v"));
        assert_ne!(describe("cc -Da=b", "v"), describe("cc -Da =b", "v"));
        assert_ne!(plain, describe("cc", "gcc 14"));
        assert_eq!(plain, describe(" cc ", "gcc 13"));
    }

    #[test]
    fn bare_names_resolve_through_path_to_the_real_file() {
        let sh = resolve("sh").expect("sh is on PATH");
        assert!(sh.is_absolute(), "{}", sh.display());
        assert_eq!(sh, sh.canonicalize().unwrap());
        assert_eq!(resolve("/bin/sh"), Path::new("/bin/sh").canonicalize().ok());
        assert_eq!(resolve("no-such-compiler-anywhere"), None);
        assert!(program_identity("no-such-compiler-anywhere").contains("not resolved"));
    }
}
