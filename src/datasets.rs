//! Small real datasets shipped with the library, to try a model on real data without a
//! download. Each is embedded in the binary, so a program that uses one runs anywhere.

use crate::Tensor;

/// The UCI handwritten digits (the set scikit-learn's `load_digits` returns): 1,797 images
/// of 8×8 pixels in `0..=16`, labels `0..=9`. Source and license: `data/README.md`.
pub struct Digits {
    /// `[1797, 1, 8, 8]` `f32` pixels scaled to `[0, 1]` (the raw value divided by 16),
    /// channels first as a convolution takes them.
    pub images: Tensor,
    /// `[1797]` `i64` class labels.
    pub labels: Tensor,
}

/// How many images the digits set holds.
pub const DIGITS_LEN: usize = 1797;

const DIGITS_CSV: &str = include_str!("../data/digits.csv");

/// The digits set: every image and label, in the file's order.
///
/// ```
/// let d = tensor::datasets::digits();
/// assert_eq!(d.images.shape(), vec![1797, 1, 8, 8]);
/// assert_eq!(d.labels.shape(), vec![1797]);
/// ```
pub fn digits() -> Digits {
    let (pixels, labels) = parse_digits(DIGITS_CSV);
    Digits {
        images: Tensor::from_vec(pixels, &[DIGITS_LEN, 1, 8, 8]),
        labels: Tensor::from_vec(labels, &[DIGITS_LEN]),
    }
}

impl Digits {
    /// The first `train` images and labels, then the rest: `((train_x, train_y), (test_x,
    /// test_y))`. The file's order mixes the writers and classes, so a prefix split is a fair
    /// one (scikit-learn's examples split the same way).
    ///
    /// # Panics
    ///
    /// When `train` exceeds [`DIGITS_LEN`].
    #[track_caller]
    pub fn split(&self, train: usize) -> ((Tensor, Tensor), (Tensor, Tensor)) {
        assert!(
            train <= DIGITS_LEN,
            "Digits::split: {train} training images asked for, the set has {DIGITS_LEN}"
        );
        let part = |t: &Tensor, start: usize, end: usize| t.narrow(0, start as isize, end - start);
        (
            (part(&self.images, 0, train), part(&self.labels, 0, train)),
            (
                part(&self.images, train, DIGITS_LEN),
                part(&self.labels, train, DIGITS_LEN),
            ),
        )
    }
}

impl Digits {
    /// A random split as scikit-learn's `train_test_split(shuffle=True, random_state=seed)`
    /// does (not the same permutation): `train` images drawn without replacement for
    /// training, the rest for testing, each part in the file's order. The file's last images
    /// come from writers the first ones lack, so a prefix split ([`Digits::split`]) measures
    /// generalization to new writers, this one to new images of the same writers.
    ///
    /// # Panics
    ///
    /// When `train` exceeds [`DIGITS_LEN`].
    #[track_caller]
    pub fn shuffled_split(&self, train: usize, seed: u64) -> ((Tensor, Tensor), (Tensor, Tensor)) {
        assert!(
            train <= DIGITS_LEN,
            "Digits::shuffled_split: {train} training images asked for, the set has {DIGITS_LEN}"
        );
        let (pixels, labels) = parse_digits(DIGITS_CSV);
        let mut order = permutation(DIGITS_LEN, seed);
        let (head, tail) = order.split_at_mut(train);
        head.sort_unstable();
        tail.sort_unstable();
        let part = |rows: &[usize]| {
            let mut x = Vec::with_capacity(rows.len() * 64);
            for &i in rows {
                x.extend_from_slice(&pixels[i * 64..(i + 1) * 64]);
            }
            let y: Vec<i64> = rows.iter().map(|&i| labels[i]).collect();
            (
                Tensor::from_vec(x, &[rows.len(), 1, 8, 8]),
                Tensor::from_vec(y, &[rows.len()]),
            )
        };
        (part(head), part(tail))
    }
}

/// A permutation of `0..n` drawn from `seed` (Fisher-Yates over a 64-bit linear congruential
/// generator: reproducible everywhere, no dependency).
pub fn permutation(n: usize, seed: u64) -> Vec<usize> {
    const A: u64 = 6364136223846793005;
    const C: u64 = 1442695040888963407;
    let mut order: Vec<usize> = (0..n).collect();
    let mut state = seed.wrapping_mul(A).wrapping_add(C);
    for i in (1..n).rev() {
        state = state.wrapping_mul(A).wrapping_add(C);
        order.swap(i, (state >> 33) as usize % (i + 1));
    }
    order
}

fn parse_digits(csv: &str) -> (Vec<f32>, Vec<i64>) {
    let mut pixels = Vec::with_capacity(DIGITS_LEN * 64);
    let mut labels = Vec::with_capacity(DIGITS_LEN);
    for line in csv.lines().filter(|l| !l.is_empty()) {
        let values: Vec<u8> = line
            .split(',')
            .map(|v| v.trim().parse().expect("digits.csv holds integers"))
            .collect();
        let (image, label) = values.split_at(64);
        pixels.extend(image.iter().map(|&p| f32::from(p) / 16.0));
        labels.push(i64::from(label[0]));
    }
    assert_eq!(labels.len(), DIGITS_LEN, "digits.csv holds every image");
    (pixels, labels)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prelude::Realize;

    #[test]
    fn parses_every_image_with_its_label() {
        let (pixels, labels) = parse_digits(DIGITS_CSV);
        assert_eq!(pixels.len(), DIGITS_LEN * 64);
        // The first rows of the file are the digits 0, 1, 2, ...
        assert_eq!(&labels[..10], &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        assert!(pixels.iter().all(|&p| (0.0..=1.0).contains(&p)));
        // Each class appears about 180 times.
        for class in 0..10 {
            let n = labels.iter().filter(|&&l| l == class).count();
            assert!((170..=185).contains(&n), "class {class}: {n} images");
        }
        // The first image's third pixel is 5 (of 16).
        assert_eq!(pixels[2], 5.0 / 16.0);
    }

    #[test]
    fn a_shuffled_split_parts_every_image_once() {
        let order = permutation(DIGITS_LEN, 3);
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..DIGITS_LEN).collect::<Vec<_>>());
        assert_ne!(order, sorted, "a permutation that moves images");
        assert_eq!(order, permutation(DIGITS_LEN, 3), "reproducible");
        let ((train_x, train_y), (test_x, test_y)) = digits().shuffled_split(1500, 3);
        assert_eq!(train_x.shape(), vec![1500, 1, 8, 8]);
        assert_eq!(test_y.shape(), vec![297]);
        // Every label is used once: the class counts of the parts add up to the whole's.
        let count = |t: &Tensor| {
            let mut c = [0usize; 10];
            for l in t.to_vec::<i64>().unwrap() {
                c[l as usize] += 1;
            }
            c
        };
        let (a, b, all) = (count(&train_y), count(&test_y), count(&digits().labels));
        assert!((0..10).all(|k| a[k] + b[k] == all[k]));
        assert_eq!(test_x.shape(), vec![297, 1, 8, 8]);
    }
}
