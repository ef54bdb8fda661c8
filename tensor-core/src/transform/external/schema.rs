//! The input schema of an external function: per input, an array of a dtype and a shape
//! pattern (fixed, or rank-polymorphic `[..., n]`), differentiable or not, or a static value.

use crate::uop::DType;
use std::fmt;
use std::sync::Arc;

/// The shapes an array input accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dims {
    /// Exactly these dims (a fixed rank).
    Fixed(Vec<usize>),
    /// `[..., d0, d1, ..]`: any leading axes, then these trailing dims (the seed's
    /// `Array[..., dtype]`, rank-polymorphic).
    Trailing(Vec<usize>),
}

impl Dims {
    /// True when an array of `shape` fits the pattern.
    pub fn accepts(&self, shape: &[usize]) -> bool {
        match self {
            Dims::Fixed(d) => d.as_slice() == shape,
            Dims::Trailing(d) => shape.len() >= d.len() && shape.ends_with(d),
        }
    }

    /// True for `[..., n]` patterns.
    pub fn is_rank_polymorphic(&self) -> bool {
        matches!(self, Dims::Trailing(_))
    }
}

impl fmt::Display for Dims {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dims::Fixed(d) => write!(f, "{d:?}"),
            Dims::Trailing(d) if d.is_empty() => write!(f, "[...]"),
            Dims::Trailing(d) => {
                let dims: Vec<String> = d.iter().map(|x| x.to_string()).collect();
                write!(f, "[..., {}]", dims.join(", "))
            }
        }
    }
}

/// One input of an external function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InputSpec {
    /// An array (a tensor at the call): batched by vmap, differentiated when `differentiable`.
    Array {
        /// The element type.
        dtype: DType,
        /// The accepted shapes.
        dims: Dims,
        /// Whether tangents and cotangents flow through this input.
        differentiable: bool,
    },
    /// A plain Rust number fixed at the call: never batched, never differentiated.
    Static,
}

impl InputSpec {
    /// An array input of `dtype` and `dims`, differentiable when `dtype` is a float.
    pub fn array(dtype: DType, dims: Dims) -> InputSpec {
        InputSpec::Array {
            dtype,
            dims,
            differentiable: dtype.is_float(),
        }
    }

    /// This array input marked non-differentiable (no tangent or cotangent flows through it).
    pub fn non_differentiable(self) -> InputSpec {
        match self {
            InputSpec::Array { dtype, dims, .. } => InputSpec::Array {
                dtype,
                dims,
                differentiable: false,
            },
            InputSpec::Static => InputSpec::Static,
        }
    }

    /// A static input: a number given at the call, handed to the host function as is.
    pub fn static_value() -> InputSpec {
        InputSpec::Static
    }

    /// True for a differentiable array input.
    pub fn is_differentiable(&self) -> bool {
        matches!(
            self,
            InputSpec::Array {
                differentiable: true,
                ..
            }
        )
    }

    /// True for a rank-polymorphic array input.
    pub fn is_rank_polymorphic(&self) -> bool {
        matches!(self, InputSpec::Array { dims, .. } if dims.is_rank_polymorphic())
    }
}

/// The shape of an output for the per-call shapes of the inputs (statics get `[]`), without
/// any leading batch axes.
pub type ShapeFn = Arc<dyn Fn(&[Vec<usize>]) -> Vec<usize> + Send + Sync>;

/// One output of an external function: its dtype and its shape as a function of the inputs'.
#[derive(Clone)]
pub struct OutputSpec {
    /// The element type.
    pub dtype: DType,
    /// The shape for given input shapes.
    pub shape: ShapeFn,
}

impl OutputSpec {
    /// An output of `dtype` whose shape `shape` computes from the input shapes.
    pub fn new(
        dtype: DType,
        shape: impl Fn(&[Vec<usize>]) -> Vec<usize> + Send + Sync + 'static,
    ) -> OutputSpec {
        OutputSpec {
            dtype,
            shape: Arc::new(shape),
        }
    }

    /// An output of `dtype` shaped like input `k` (an index into the schema).
    pub fn like_input(k: usize, dtype: DType) -> OutputSpec {
        OutputSpec::new(dtype, move |shapes| shapes[k].clone())
    }

    /// An output of `dtype` and a fixed `shape`.
    pub fn fixed(dtype: DType, shape: &[usize]) -> OutputSpec {
        let shape = shape.to_vec();
        OutputSpec::new(dtype, move |_| shape.clone())
    }
}

impl fmt::Debug for OutputSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OutputSpec({})", self.dtype)
    }
}
