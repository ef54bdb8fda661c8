//! A tensor cut into pieces along one axis, each convention under its own name so a port
//! gets the pieces it expects: torch's `split` (pieces of a given size, the last shorter; or
//! the size of each piece) and `chunk` (`n` pieces of `ceil(len / n)`, possibly fewer), and
//! NumPy's `array_split` (`n` pieces whose sizes differ by at most one) and `split_at` (at
//! given indices, NumPy's `split(x, [i, j])`). Every piece is a view (a shrink) of the
//! original.

use super::Tensor;
use super::broadcast::normalize_axis;

/// The sizes [`Tensor::split`] cuts, as torch's `split_size_or_sections`: one size (`2`:
/// every piece that long, the last one shorter) or the size of each piece (`[1, 3]`, summing
/// to the axis).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SplitSizes {
    /// Pieces of this size, the last one holding what is left.
    Each(usize),
    /// One piece per size, in order.
    Sizes(Vec<usize>),
}

macro_rules! impl_split_size_from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for SplitSizes {
            /// One size for every piece.
            ///
            /// # Panics
            ///
            /// On a negative size (named as `split`, where it is used).
            #[track_caller]
            fn from(size: $t) -> SplitSizes {
                match usize::try_from(size) {
                    Ok(size) => SplitSizes::Each(size),
                    Err(_) => panic!("split: a piece size of {size} is negative"),
                }
            }
        }
    )*};
}
impl_split_size_from_int!(usize, u32, i32, i64, isize);

impl<const N: usize> From<[usize; N]> for SplitSizes {
    fn from(sizes: [usize; N]) -> SplitSizes {
        SplitSizes::Sizes(sizes.to_vec())
    }
}

impl From<&[usize]> for SplitSizes {
    fn from(sizes: &[usize]) -> SplitSizes {
        SplitSizes::Sizes(sizes.to_vec())
    }
}

impl From<Vec<usize>> for SplitSizes {
    fn from(sizes: Vec<usize>) -> SplitSizes {
        SplitSizes::Sizes(sizes)
    }
}

impl From<&Vec<usize>> for SplitSizes {
    fn from(sizes: &Vec<usize>) -> SplitSizes {
        SplitSizes::Sizes(sizes.clone())
    }
}

impl Tensor {
    /// Torch's `split(size_or_sizes, dim)`: pieces of `size` along `axis`, the last one shorter
    /// when `size` does not divide the axis; or, given a list, one piece per size (the sizes
    /// must sum to the axis). NumPy's `np.split(x, n)` (`n` sections) is
    /// [`Tensor::array_split`], `np.split(x, [i, j])` is [`Tensor::split_at`].
    ///
    /// ```
    /// # use tensor_core::Tensor;
    /// let x = Tensor::arange(7);
    /// let sizes = |p: Vec<Tensor>| p.iter().map(|p| p.shape()[0]).collect::<Vec<_>>();
    /// assert_eq!(sizes(x.split(3, 0)), vec![3, 3, 1]);               // torch.split(x, 3)
    /// assert_eq!(sizes(x.split([2, 5], 0)), vec![2, 5]);             // torch.split(x, [2, 5])
    /// ```
    ///
    /// # Panics
    ///
    /// On an axis out of range, a size of 0 for a non-empty axis, a negative size, sizes
    /// that do not sum to the axis, or more than [`MAX_PIECES`] pieces.
    #[track_caller]
    pub fn split(&self, size_or_sizes: impl Into<SplitSizes>, axis: isize) -> Vec<Tensor> {
        let _op = super::op_scope::OpScope::enter("split");
        let shape = self.shape();
        let ax = normalize_axis("split", axis, &shape);
        let n = shape[ax];
        let sizes = match size_or_sizes.into() {
            SplitSizes::Each(size) => each_of(size, n, axis, &shape),
            SplitSizes::Sizes(sizes) => {
                check_piece_count("split", sizes.len());
                let total = sizes.iter().try_fold(0usize, |t, &s| t.checked_add(s));
                if total != Some(n) {
                    panic!(
                        "split: sizes {sizes:?} do not sum to the {n} elements of axis {axis} of \
                         shape {shape:?}"
                    );
                }
                sizes
            }
        };
        self.pieces_of(ax, &sizes)
    }

    /// Torch's `chunk(chunks, dim)`: pieces of `ceil(len / chunks)` along `axis`, the last one
    /// shorter, so there may be fewer than `chunks` (7 elements in 4 chunks are `[2, 2, 2, 1]`,
    /// 6 in 4 are `[2, 2, 2]`). NumPy's `array_split` (exactly `chunks` pieces, sizes differing
    /// by at most one) is [`Tensor::array_split`].
    ///
    /// ```
    /// # use tensor_core::Tensor;
    /// let sizes = |p: Vec<Tensor>| p.iter().map(|p| p.shape()[0]).collect::<Vec<_>>();
    /// assert_eq!(sizes(Tensor::arange(6).chunk(4, 0)), vec![2, 2, 2]); // torch.chunk(x, 4)
    /// ```
    ///
    /// # Panics
    ///
    /// When `chunks` is 0 or more than [`MAX_PIECES`], or on an axis out of range.
    #[track_caller]
    pub fn chunk(&self, chunks: usize, axis: isize) -> Vec<Tensor> {
        let _op = super::op_scope::OpScope::enter("chunk");
        let shape = self.shape();
        let ax = normalize_axis("chunk", axis, &shape);
        if chunks == 0 {
            panic!("chunk: cannot cut axis {axis} of shape {shape:?} into 0 chunks");
        }
        check_piece_count("chunk", chunks);
        let n = shape[ax];
        // As torch: an empty axis gives `chunks` empty pieces.
        let sizes = if n == 0 {
            vec![0; chunks]
        } else {
            each_of(n.div_ceil(chunks), n, axis, &shape)
        };
        self.pieces_of(ax, &sizes)
    }

    /// NumPy's `array_split(x, sections, axis)`: `sections` pieces along `axis` whose sizes
    /// differ by at most one, the larger ones first (NumPy's `split(x, sections)` when they are
    /// equal).
    ///
    /// ```
    /// # use tensor_core::Tensor;
    /// let parts = Tensor::arange(7).array_split(3, 0);            // np.array_split(x, 3)
    /// let sizes: Vec<_> = parts.iter().map(|p| p.shape()[0]).collect();
    /// assert_eq!(sizes, vec![3, 2, 2]);
    /// ```
    ///
    /// # Panics
    ///
    /// Panics when `sections` is 0 or more than [`MAX_PIECES`], or on an axis out of range.
    #[track_caller]
    pub fn array_split(&self, sections: usize, axis: isize) -> Vec<Tensor> {
        let _op = super::op_scope::OpScope::enter("array_split");
        let shape = self.shape();
        let ax = normalize_axis("array_split", axis, &shape);
        if sections == 0 {
            panic!("array_split: cannot cut axis {axis} of shape {shape:?} into 0 sections");
        }
        check_piece_count("array_split", sections);
        let n = shape[ax];
        let (base, extra) = (n / sections, n % sections);
        let sizes: Vec<usize> = (0..sections)
            .map(|i| base + usize::from(i < extra))
            .collect();
        self.pieces_of(ax, &sizes)
    }

    /// The pieces between the `indices` along `axis`, as NumPy's `split(x, [i, j], axis)`: `x[:i]`,
    /// `x[i:j]`, `x[j:]` (indices past the end give empty pieces; negative ones count from the
    /// end).
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let parts = Tensor::arange(5).split_at(&[1, 3], 0);        // np.split(x, [1, 3])
    /// let sizes: Vec<_> = parts.iter().map(|p| p.shape()[0]).collect();
    /// assert_eq!(sizes, vec![1, 2, 2]);
    /// ```
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range.
    #[track_caller]
    pub fn split_at(&self, indices: &[isize], axis: isize) -> Vec<Tensor> {
        let _op = super::op_scope::OpScope::enter("split_at");
        let shape = self.shape();
        let ax = normalize_axis("split_at", axis, &shape);
        let n = shape[ax] as isize;
        let mut bounds = vec![0];
        bounds.extend(
            indices
                .iter()
                .map(|&i| if i < 0 { i + n } else { i }.clamp(0, n)),
        );
        bounds.push(n);
        bounds
            .windows(2)
            .map(|w| self.slice(ax as isize, w[0], w[1].max(w[0])))
            .collect()
    }

    /// Consecutive pieces of `sizes` (summing to the axis) along axis `ax`.
    fn pieces_of(&self, ax: usize, sizes: &[usize]) -> Vec<Tensor> {
        let mut start = 0;
        sizes
            .iter()
            .map(|&len| {
                let piece = self.slice(ax as isize, start as isize, (start + len) as isize);
                start += len;
                piece
            })
            .collect()
    }
}

/// The sizes of pieces of `size` covering `n` elements, the last one shorter; one empty piece
/// for an empty axis (as torch).
#[track_caller]
fn each_of(size: usize, n: usize, axis: isize, shape: &[usize]) -> Vec<usize> {
    let op = super::op_scope::user_op("split");
    if n == 0 {
        return vec![0];
    }
    if size == 0 {
        panic!("{op}: pieces of size 0 cannot cover axis {axis} of shape {shape:?}");
    }
    let count = n.div_ceil(size);
    check_piece_count(op, count);
    let mut sizes = vec![size; count];
    sizes[count - 1] = n - size * (count - 1);
    sizes
}

/// The most pieces one `split`, `chunk` or `array_split` makes: each piece is a tensor of its
/// own, so a count sized by hostile data (a million sections of an empty axis) is refused
/// instead of building that many graphs.
pub const MAX_PIECES: usize = 1 << 20;

#[track_caller]
fn check_piece_count(op: &str, pieces: usize) {
    let op = super::op_scope::user_op(op);
    if pieces > MAX_PIECES {
        panic!("{op}: {pieces} pieces are more than the {MAX_PIECES} one call makes");
    }
}
