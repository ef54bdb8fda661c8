//! The op the user called. Composite ops (`softmax`, `sort`, `var`, ...) are built from
//! other ops; a refusal raised by one of those names the op the user wrote, so
//! `x.softmax(-3)` says `softmax: axis -3 ...`, not `max: ...`.

use std::cell::Cell;

thread_local! {
    static CALLED: Cell<Option<&'static str>> = const { Cell::new(None) };
    /// How many ops (and library regions) enclose the current call.
    static DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// While alive, refusals name `op` (unless an enclosing scope named another first). A guard
/// rather than a closure, so that `#[track_caller]` still reaches the user's line.
pub(crate) struct OpScope {
    entered: bool,
    _depth: Depth,
}

impl OpScope {
    /// Enters the op `op` the user called.
    pub(crate) fn enter(op: &'static str) -> OpScope {
        let entered = CALLED.with(|called| {
            let outermost = called.get().is_none();
            if outermost {
                called.set(Some(op));
            }
            outermost
        });
        OpScope {
            entered,
            _depth: Depth::enter(),
        }
    }
}

/// One level of nesting of library code, undone when dropped (also by a panic's unwinding).
struct Depth;

impl Depth {
    fn enter() -> Depth {
        DEPTH.with(|d| d.set(d.get() + 1));
        Depth
    }
}

impl Drop for Depth {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get() - 1));
    }
}

/// While alive, the code that runs is the library's, not the user's: a transform applying
/// its rules, or tracing a function whose graph it keeps per signature (see
/// [`called_by_user`]).
pub(crate) struct LibraryScope {
    _depth: Depth,
}

impl LibraryScope {
    /// Enters library code.
    pub(crate) fn enter() -> LibraryScope {
        LibraryScope {
            _depth: Depth::enter(),
        }
    }
}

/// True when the op running now is one the user called: its own [`OpScope`] is the only
/// one, not enclosed by a composite op or a transform. A scalar the user passes is a value
/// bound at run time (`tensor::value`); one a library op writes is code.
pub(crate) fn called_by_user() -> bool {
    DEPTH.with(Cell::get) == 1 && CALLED.with(Cell::get).is_some()
}

impl Drop for OpScope {
    fn drop(&mut self) {
        if self.entered {
            CALLED.with(|called| called.set(None));
        }
    }
}

/// The name a refusal raised by `op` gives: the op the user called, else `op` itself.
pub(crate) fn user_op(op: &str) -> &str {
    CALLED.with(Cell::get).unwrap_or(op)
}

/// `message` (`"op: ..."`, from a fallible twin such as `try_reshape`) with its leading op
/// named as the user called it.
pub(crate) fn as_called(message: &str) -> String {
    match message.split_once(": ") {
        Some((op, rest)) if !op.contains(' ') => format!("{}: {rest}", user_op(op)),
        _ => message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_outermost_scope_names_refusals_until_it_ends() {
        assert_eq!(user_op("max"), "max");
        {
            let _outer = OpScope::enter("softmax");
            let _inner = OpScope::enter("logsumexp");
            assert_eq!(user_op("max"), "softmax");
        }
        assert_eq!(user_op("max"), "max");
    }

    #[test]
    fn a_fallible_twins_message_is_renamed_in_a_scope() {
        let _scope = OpScope::enter("tile");
        assert_eq!(
            as_called("expand: size 9 is too large"),
            "tile: size 9 is too large"
        );
        assert_eq!(as_called("no op here"), "no op here");
    }

    #[test]
    fn a_scope_ends_when_its_op_panics() {
        let caught = std::panic::catch_unwind(|| {
            let _scope = OpScope::enter("sort");
            panic!("{}: refused", user_op("argsort"));
        });
        assert!(caught.is_err());
        assert_eq!(user_op("argsort"), "argsort");
    }
}
