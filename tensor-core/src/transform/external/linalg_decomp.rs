//! The host algorithms behind the linear-algebra externals ([`super::linalg_ops`]), in `f64`
//! on small dense row-major matrices: LU with partial pivoting, Cholesky, Householder QR (the
//! reduced factors, LAPACK's sign convention) and the cyclic Jacobi eigenvalue algorithm for
//! symmetric matrices. Their pivoting and iteration depend on the values, which is why they run
//! on the host rather than as kernels.

/// A dense row-major matrix of `f64`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Mat {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<f64>,
}

impl Mat {
    /// The `rows x cols` matrix holding `data` row-major.
    pub fn new(rows: usize, cols: usize, data: Vec<f64>) -> Mat {
        debug_assert_eq!(data.len(), rows * cols);
        Mat { rows, cols, data }
    }

    pub fn zeros(rows: usize, cols: usize) -> Mat {
        Mat::new(rows, cols, vec![0.0; rows * cols])
    }

    pub fn eye(n: usize) -> Mat {
        let mut m = Mat::zeros(n, n);
        for i in 0..n {
            m.set(i, i, 1.0);
        }
        m
    }

    /// A `1 x 1` matrix (a scalar result or cotangent).
    pub fn scalar(v: f64) -> Mat {
        Mat::new(1, 1, vec![v])
    }

    pub fn at(&self, r: usize, c: usize) -> f64 {
        self.data[r * self.cols + c]
    }

    pub fn set(&mut self, r: usize, c: usize, v: f64) {
        self.data[r * self.cols + c] = v;
    }

    pub fn t(&self) -> Mat {
        let mut out = Mat::zeros(self.cols, self.rows);
        for r in 0..self.rows {
            for c in 0..self.cols {
                out.set(c, r, self.at(r, c));
            }
        }
        out
    }

    pub fn matmul(&self, other: &Mat) -> Mat {
        assert_eq!(self.cols, other.rows, "matmul of mismatched matrices");
        let mut out = Mat::zeros(self.rows, other.cols);
        for r in 0..self.rows {
            for k in 0..self.cols {
                let a = self.at(r, k);
                if a == 0.0 {
                    continue;
                }
                for c in 0..other.cols {
                    out.data[r * other.cols + c] += a * other.at(k, c);
                }
            }
        }
        out
    }

    pub fn zip(&self, other: &Mat, f: impl Fn(f64, f64) -> f64) -> Mat {
        let data = self.data.iter().zip(&other.data).map(|(a, b)| f(*a, *b));
        Mat::new(self.rows, self.cols, data.collect())
    }

    pub fn map(&self, f: impl Fn(f64) -> f64) -> Mat {
        Mat::new(
            self.rows,
            self.cols,
            self.data.iter().map(|v| f(*v)).collect(),
        )
    }

    pub fn add(&self, other: &Mat) -> Mat {
        self.zip(other, |a, b| a + b)
    }

    pub fn sub(&self, other: &Mat) -> Mat {
        self.zip(other, |a, b| a - b)
    }

    pub fn scale(&self, s: f64) -> Mat {
        self.map(|v| v * s)
    }

    /// `(A + Aᵀ) / 2`.
    pub fn sym(&self) -> Mat {
        self.add(&self.t()).scale(0.5)
    }

    /// The elements on or below diagonal `k` (`k = -1`: strictly below), the rest zero.
    pub fn tril(&self, k: isize) -> Mat {
        let mut out = self.clone();
        for r in 0..self.rows {
            for c in 0..self.cols {
                if c as isize - r as isize > k {
                    out.set(r, c, 0.0);
                }
            }
        }
        out
    }

    pub fn trace(&self) -> f64 {
        (0..self.rows.min(self.cols)).map(|i| self.at(i, i)).sum()
    }
}

/// `PA = LU` with partial pivoting (unit lower `L` and `U` packed in `lu`).
pub(crate) struct Lu {
    lu: Mat,
    perm: Vec<usize>,
    sign: f64,
    /// True when a pivot is exactly zero (LAPACK's `getrf` info > 0).
    pub singular: bool,
}

impl Lu {
    /// The factorization of the square matrix `a`; a column with no nonzero pivot is left
    /// as is and marks the matrix singular.
    pub fn of(a: &Mat) -> Lu {
        let n = a.rows;
        let (mut lu, mut sign, mut singular) = (a.clone(), 1.0, false);
        let mut perm: Vec<usize> = (0..n).collect();
        for k in 0..n {
            let p = (k..n)
                .max_by(|&i, &j| lu.at(i, k).abs().total_cmp(&lu.at(j, k).abs()))
                .expect("a nonempty column");
            if lu.at(p, k) == 0.0 {
                singular = true;
                continue;
            }
            if p != k {
                swap_rows(&mut lu, p, k);
                perm.swap(p, k);
                sign = -sign;
            }
            let pivot = lu.at(k, k);
            for i in k + 1..n {
                let f = lu.at(i, k) / pivot;
                lu.set(i, k, f);
                for j in k + 1..n {
                    let v = lu.at(i, j) - f * lu.at(k, j);
                    lu.set(i, j, v);
                }
            }
        }
        Lu {
            lu,
            perm,
            sign,
            singular,
        }
    }

    /// `A⁻¹ B` (a zero pivot divides by zero: infinities and NaNs).
    pub fn solve(&self, b: &Mat) -> Mat {
        let n = self.lu.rows;
        let mut x = Mat::zeros(n, b.cols);
        for (i, &p) in self.perm.iter().enumerate() {
            for c in 0..b.cols {
                x.set(i, c, b.at(p, c));
            }
        }
        for c in 0..b.cols {
            for i in 0..n {
                let s: f64 = (0..i).map(|k| self.lu.at(i, k) * x.at(k, c)).sum();
                x.set(i, c, x.at(i, c) - s);
            }
            for i in (0..n).rev() {
                let s: f64 = (i + 1..n).map(|k| self.lu.at(i, k) * x.at(k, c)).sum();
                x.set(i, c, (x.at(i, c) - s) / self.lu.at(i, i));
            }
        }
        x
    }

    /// `A⁻ᵀ B`.
    pub fn solve_t(&self, b: &Mat) -> Mat {
        // Aᵀ = Uᵀ Lᵀ P, so A⁻ᵀ B = Pᵀ L⁻ᵀ U⁻ᵀ B.
        let n = self.lu.rows;
        let mut y = b.clone();
        for c in 0..b.cols {
            for i in 0..n {
                let s: f64 = (0..i).map(|k| self.lu.at(k, i) * y.at(k, c)).sum();
                y.set(i, c, (y.at(i, c) - s) / self.lu.at(i, i));
            }
            for i in (0..n).rev() {
                let s: f64 = (i + 1..n).map(|k| self.lu.at(k, i) * y.at(k, c)).sum();
                y.set(i, c, y.at(i, c) - s);
            }
        }
        let mut x = Mat::zeros(n, b.cols);
        for (i, &p) in self.perm.iter().enumerate() {
            for c in 0..b.cols {
                x.set(p, c, y.at(i, c));
            }
        }
        x
    }

    pub fn det(&self) -> f64 {
        let n = self.lu.rows;
        if self.singular {
            return 0.0;
        }
        self.sign * (0..n).map(|i| self.lu.at(i, i)).product::<f64>()
    }

    /// The sign of the determinant and the log of its absolute value: `(0, -inf)` when
    /// singular, as NumPy's `slogdet`.
    pub fn slogdet(&self) -> (f64, f64) {
        if self.singular {
            return (0.0, f64::NEG_INFINITY);
        }
        let n = self.lu.rows;
        let diag = (0..n).map(|i| self.lu.at(i, i));
        let sign = diag.clone().fold(self.sign, |s, d| s * d.signum());
        (sign, diag.map(|d| d.abs().ln()).sum())
    }
}

fn swap_rows(m: &mut Mat, a: usize, b: usize) {
    for c in 0..m.cols {
        m.data.swap(a * m.cols + c, b * m.cols + c);
    }
}

/// The lower Cholesky factor of the symmetric matrix `a` (its lower triangle is read), or the
/// order of the leading minor that is not positive definite.
pub(crate) fn cholesky(a: &Mat) -> Result<Mat, usize> {
    let n = a.rows;
    let mut l = Mat::zeros(n, n);
    for j in 0..n {
        let d = a.at(j, j) - (0..j).map(|k| l.at(j, k).powi(2)).sum::<f64>();
        if d.is_nan() || d <= 0.0 {
            return Err(j + 1);
        }
        let djj = d.sqrt();
        l.set(j, j, djj);
        for i in j + 1..n {
            let s: f64 = (0..j).map(|k| l.at(i, k) * l.at(j, k)).sum();
            l.set(i, j, (a.at(i, j) - s) / djj);
        }
    }
    Ok(l)
}

/// `L⁻¹ B` for lower triangular `L`.
pub(crate) fn solve_lower(l: &Mat, b: &Mat) -> Mat {
    let n = l.rows;
    let mut x = b.clone();
    for c in 0..b.cols {
        for i in 0..n {
            let s: f64 = (0..i).map(|k| l.at(i, k) * x.at(k, c)).sum();
            x.set(i, c, (x.at(i, c) - s) / l.at(i, i));
        }
    }
    x
}

/// `U⁻¹ B` for upper triangular `U`.
pub(crate) fn solve_upper(u: &Mat, b: &Mat) -> Mat {
    let n = u.rows;
    let mut x = b.clone();
    for c in 0..b.cols {
        for i in (0..n).rev() {
            let s: f64 = (i + 1..n).map(|k| u.at(i, k) * x.at(k, c)).sum();
            x.set(i, c, (x.at(i, c) - s) / u.at(i, i));
        }
    }
    x
}

/// The reduced QR factors of the `m x n` matrix `a`: `Q` is `m x k` with orthonormal
/// columns, `R` is `k x n` upper triangular, `k = min(m, n)`, by Householder reflections with
/// LAPACK's `dgeqrf` convention (`R[j][j] = -sign(a_jj) ‖a_j:‖`), so the signs are NumPy's.
pub(crate) fn qr(a: &Mat) -> (Mat, Mat) {
    let (m, n) = (a.rows, a.cols);
    let k = m.min(n);
    let mut r = a.clone();
    let mut reflectors: Vec<(Vec<f64>, f64)> = Vec::with_capacity(k);
    for j in 0..k {
        let alpha = r.at(j, j);
        let xnorm = (j + 1..m).map(|i| r.at(i, j).powi(2)).sum::<f64>().sqrt();
        if xnorm == 0.0 {
            reflectors.push((Vec::new(), 0.0));
            continue;
        }
        let beta = -alpha.signum() * alpha.hypot(xnorm);
        let tau = (beta - alpha) / beta;
        let scale = 1.0 / (alpha - beta);
        let mut v = vec![1.0];
        v.extend((j + 1..m).map(|i| r.at(i, j) * scale));
        // H = I - tau v vᵀ applied to the trailing columns.
        for c in j..n {
            let s: f64 = (j..m).map(|i| v[i - j] * r.at(i, c)).sum::<f64>() * tau;
            for i in j..m {
                r.set(i, c, r.at(i, c) - s * v[i - j]);
            }
        }
        reflectors.push((v, tau));
    }
    let mut q = Mat::zeros(m, k);
    for i in 0..k {
        q.set(i, i, 1.0);
    }
    for (j, (v, tau)) in reflectors.iter().enumerate().rev() {
        if *tau == 0.0 {
            continue;
        }
        for c in 0..k {
            let s: f64 = (j..m).map(|i| v[i - j] * q.at(i, c)).sum::<f64>() * tau;
            for i in j..m {
                q.set(i, c, q.at(i, c) - s * v[i - j]);
            }
        }
    }
    let r = Mat::new(k, n, r.data[..k * n].to_vec()).tril_upper();
    (q, r)
}

impl Mat {
    /// The elements on or above the diagonal, the rest zero.
    fn tril_upper(&self) -> Mat {
        let mut out = self.clone();
        for r in 0..self.rows {
            for c in 0..r.min(self.cols) {
                out.set(r, c, 0.0);
            }
        }
        out
    }
}

/// The eigenvalues of the symmetric matrix `a`, ascending, and its eigenvectors as the columns
/// of `V`, by cyclic Jacobi rotations. Each eigenvector's sign makes its element of largest
/// magnitude (the first such) positive.
pub(crate) fn eigh(a: &Mat) -> (Vec<f64>, Mat) {
    let n = a.rows;
    let mut s = a.clone();
    let mut v = Mat::eye(n);
    for _sweep in 0..100 {
        let off: f64 = (0..n)
            .flat_map(|p| (0..n).filter(move |&q| q != p).map(move |q| (p, q)))
            .map(|(p, q)| s.at(p, q).powi(2))
            .sum();
        let scale: f64 = s.data.iter().map(|x| x * x).sum();
        if off <= 1e-30 * scale || off == 0.0 {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                jacobi_rotate(&mut s, &mut v, p, q);
            }
        }
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| s.at(i, i).total_cmp(&s.at(j, j)));
    let values = order.iter().map(|&i| s.at(i, i)).collect();
    let mut vectors = Mat::zeros(n, n);
    for (c, &i) in order.iter().enumerate() {
        let column: Vec<f64> = (0..n).map(|r| v.at(r, i)).collect();
        let big = column
            .iter()
            .copied()
            .reduce(|a, b| if b.abs() > a.abs() { b } else { a })
            .unwrap_or(1.0);
        let sign = if big < 0.0 { -1.0 } else { 1.0 };
        for (r, x) in column.iter().enumerate() {
            vectors.set(r, c, sign * x);
        }
    }
    (values, vectors)
}

/// One rotation `S ← JᵀSJ`, `V ← VJ` zeroing `S[p][q]`.
fn jacobi_rotate(s: &mut Mat, v: &mut Mat, p: usize, q: usize) {
    let apq = s.at(p, q);
    if apq == 0.0 {
        return;
    }
    let theta = (s.at(q, q) - s.at(p, p)) / (2.0 * apq);
    let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
    let t = if theta == 0.0 { 1.0 } else { t };
    let c = 1.0 / (t * t + 1.0).sqrt();
    let sn = t * c;
    let n = s.rows;
    for k in 0..n {
        let (skp, skq) = (s.at(k, p), s.at(k, q));
        s.set(k, p, c * skp - sn * skq);
        s.set(k, q, sn * skp + c * skq);
    }
    for k in 0..n {
        let (spk, sqk) = (s.at(p, k), s.at(q, k));
        s.set(p, k, c * spk - sn * sqk);
        s.set(q, k, sn * spk + c * sqk);
    }
    for k in 0..n {
        let (vkp, vkq) = (v.at(k, p), v.at(k, q));
        v.set(k, p, c * vkp - sn * vkq);
        v.set(k, q, sn * vkp + c * vkq);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(m: usize, n: usize) -> Mat {
        Mat::new(
            m,
            n,
            (0..m * n)
                .map(|i| ((i * 7 % 11) as f64) - 5.0 + 0.1 * i as f64)
                .collect(),
        )
    }

    fn close(a: &Mat, b: &Mat, tol: f64) {
        let diff = a.sub(b).data.iter().fold(0.0f64, |m, d| m.max(d.abs()));
        assert!(diff < tol, "{a:?} vs {b:?}");
    }

    #[test]
    fn lu_solves_and_its_transpose_solves() {
        let a = sample(4, 4);
        let b = sample(4, 2);
        let lu = Lu::of(&a);
        close(&a.matmul(&lu.solve(&b)), &b, 1e-10);
        close(&a.t().matmul(&lu.solve_t(&b)), &b, 1e-10);
    }

    #[test]
    fn qr_and_eigh_reconstruct_their_matrix() {
        for (m, n) in [(5, 3), (3, 5), (4, 4)] {
            let a = sample(m, n);
            let (q, r) = qr(&a);
            close(&q.matmul(&r), &a, 1e-10);
            close(&q.t().matmul(&q), &Mat::eye(m.min(n)), 1e-12);
        }
        let s = sample(5, 5).sym();
        let (w, v) = eigh(&s);
        assert!(w.windows(2).all(|p| p[0] <= p[1]));
        let mut d = Mat::zeros(5, 5);
        for (i, wi) in w.iter().enumerate() {
            d.set(i, i, *wi);
        }
        close(&v.matmul(&d).matmul(&v.t()), &s, 1e-10);
    }
}
