//! Kernel names in tinygrad's convention: `E_` for elementwise kernels, `r_` for kernels with a
//! reduce, then the sizes of the kernel's ranges in range-id order (`E_4_4`, `r_3_2`).
//!
//! The name is taken from the kernel AST before optimization, so the same computation has the
//! same name with and without `NOOPT` (the DEBUG listing stays comparable).

use crate::uop::{Arg, AxisType, Op, UOp};
use std::collections::HashMap;

/// The tinygrad-style base name of a kernel AST: `E_` or `r_` and the range sizes.
pub fn kernel_name(ast: &UOp) -> String {
    let mut ranges: Vec<(usize, AxisType, i64)> = ast
        .toposort()
        .into_iter()
        .filter_map(|u| match u.arg() {
            Arg::Range { id, axis_type } if u.op() == Op::Range => {
                Some((*id, *axis_type, u.s(0).vmax().as_i64()))
            }
            _ => None,
        })
        .collect();
    ranges.sort_by_key(|r| r.0);
    let has_reduce = ranges.iter().any(|r| {
        matches!(
            r.1,
            AxisType::Reduce | AxisType::Unroll | AxisType::Lane | AxisType::ReduceBlock
        )
    });
    let prefix = if has_reduce { "r" } else { "E" };
    if ranges.is_empty() {
        return format!("{prefix}_1");
    }
    let sizes: Vec<String> = ranges
        .iter()
        .take(NAMED_RANGES)
        .map(|r| r.2.to_string())
        .collect();
    match ranges.len().checked_sub(NAMED_RANGES) {
        Some(more) if more > 0 => format!("{prefix}_{}_and{more}", sizes.join("_")),
        _ => format!("{prefix}_{}", sizes.join("_")),
    }
}

/// How many loop sizes a kernel name lists; a kernel of many fused reduces has dozens of
/// loops, and its name becomes a file name (at most 255 bytes), so the rest are counted.
pub const NAMED_RANGES: usize = 12;

/// `base` the first time it is seen, then `base` + `n1`, `n2`, ... (tinygrad's `E_4_4n1`).
///
/// `seen` counts the uses of each base name; the owner of a program's kernel list keeps it.
pub fn unique_name(base: &str, seen: &mut HashMap<String, usize>) -> String {
    let count = seen.entry(base.to_string()).or_insert(0);
    let name = if *count == 0 {
        base.to_string()
    } else {
        format!("{base}n{count}")
    };
    *count += 1;
    name
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uop::{DType, ReduceOp};

    #[test]
    fn duplicate_names_get_numbered_suffixes() {
        let mut seen = HashMap::new();
        assert_eq!(unique_name("E_4_4", &mut seen), "E_4_4");
        assert_eq!(unique_name("E_4_4", &mut seen), "E_4_4n1");
        assert_eq!(unique_name("r_3", &mut seen), "r_3");
        assert_eq!(unique_name("E_4_4", &mut seen), "E_4_4n2");
    }

    #[test]
    fn reduce_kernels_are_named_r_with_all_range_sizes() {
        let out = UOp::range(3, 0, AxisType::Loop);
        let red = UOp::range(2, 1, AxisType::Reduce);
        let buf = UOp::new(Op::DefineGlobal, DType::F32, vec![], Arg::Int(0));
        let idx = UOp::new(Op::Address, DType::F32, vec![buf, out.clone()], Arg::None);
        let sum = UOp::new(
            Op::Reduce,
            DType::F32,
            vec![out.cast(DType::F32), red],
            Arg::Reduce(ReduceOp::Add, vec![]),
        );
        let ast = UOp::sink(vec![UOp::store(&idx, &sum)]);
        assert_eq!(kernel_name(&ast), "r_3_2");
    }

    #[test]
    fn a_kernel_of_many_loops_lists_the_first_sizes_and_counts_the_rest() {
        let ranges: Vec<UOp> = (0..NAMED_RANGES + 5)
            .map(|id| UOp::range(2, id, AxisType::Loop))
            .collect();
        let buf = UOp::new(Op::DefineGlobal, DType::F32, vec![], Arg::Int(0));
        let idx = UOp::new(
            Op::Address,
            DType::F32,
            {
                let mut src = vec![buf];
                src.extend(ranges);
                src
            },
            Arg::None,
        );
        let ast = UOp::sink(vec![UOp::store(&idx, &UOp::constant(1.0f32, DType::F32))]);
        let want = format!("E{}_and5", "_2".repeat(NAMED_RANGES));
        assert_eq!(kernel_name(&ast), want);
    }
}
