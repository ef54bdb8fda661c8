//! Compile-time behaviour of the macros: every mistake they can see fails to compile with a
//! message spanned on the offending token (tests/ui/fail, with `.stderr` snapshots), and the
//! main patterns compile and run (tests/ui/pass).

#[test]
fn macro_mistakes_are_compile_errors_and_main_patterns_compile() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/fail/*.rs");
    cases.pass("tests/ui/pass/*.rs");
}
