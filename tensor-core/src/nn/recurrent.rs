//! Recurrent layers with PyTorch's weights, gate order and layouts: `rnn` (tanh or ReLU),
//! `gru` and `lstm`, over several layers and both directions, and their cells.
//!
//! A layer is a loop over time, unrolled while the graph is built (as `transform::scan`
//! unrolls): the input's contribution to every gate is one matrix product for all steps
//! (`x · W_ihᵀ + b_ih`, `[T, N, gates]`), and the loop carries only the state through
//! `h · W_hhᵀ + b_hh`. Unrolled, a layer is an ordinary composition, so every transform
//! (per-sample gradients included) applies with no rule of its own. The weights are a tree
//! (`transform::tree`), so they are one argument of `grad` and of a checkpoint.

use crate::tensor::Tensor;
use crate::uop::DType;

use super::layers::linear;

/// The weights of one layer and direction of a recurrent network, named and shaped as
/// PyTorch's `weight_ih_l{k}`, `weight_hh_l{k}`, `bias_ih_l{k}`, `bias_hh_l{k}`: `weight_ih`
/// `[gates · H, I]`, `weight_hh` `[gates · H, H]`, biases `[gates · H]`, with the gates in
/// PyTorch's order (GRU: reset, update, new; LSTM: input, forget, cell, output).
#[derive(Clone, Debug)]
pub struct RecurrentWeights {
    /// The input-to-hidden weights, `[gates · H, I]`.
    pub weight_ih: Tensor,
    /// The hidden-to-hidden weights, `[gates · H, H]`.
    pub weight_hh: Tensor,
    /// The input-to-hidden bias, `[gates · H]`.
    pub bias_ih: Option<Tensor>,
    /// The hidden-to-hidden bias, `[gates · H]`.
    pub bias_hh: Option<Tensor>,
}

/// Which recurrence a layer runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recurrence {
    /// `h' = tanh(x W_ihᵀ + b_ih + h W_hhᵀ + b_hh)` (PyTorch's `RNN`, the default).
    RnnTanh,
    /// As `RnnTanh` with ReLU (`RNN(nonlinearity='relu')`).
    RnnRelu,
    /// PyTorch's `GRU`.
    Gru,
    /// PyTorch's `LSTM` (no projection).
    Lstm,
}

impl Recurrence {
    /// How many gates share the weights' rows: 1, 3 (GRU) or 4 (LSTM).
    pub fn gates(self) -> usize {
        match self {
            Recurrence::RnnTanh | Recurrence::RnnRelu => 1,
            Recurrence::Gru => 3,
            Recurrence::Lstm => 4,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Recurrence::RnnTanh | Recurrence::RnnRelu => "rnn",
            Recurrence::Gru => "gru",
            Recurrence::Lstm => "lstm",
        }
    }
}

/// The shape options of PyTorch's recurrent modules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecurrentOptions {
    /// Stacked layers; layer `k + 1` reads the outputs of layer `k`.
    pub num_layers: usize,
    /// A second pass from the last step to the first, its outputs concatenated after the
    /// forward pass's.
    pub bidirectional: bool,
    /// Input and output as `[N, T, features]` instead of `[T, N, features]` (the states stay
    /// `[layers · directions, N, H]`, as in PyTorch).
    pub batch_first: bool,
}

impl Default for RecurrentOptions {
    fn default() -> Self {
        RecurrentOptions {
            num_layers: 1,
            bidirectional: false,
            batch_first: false,
        }
    }
}

impl RecurrentOptions {
    fn directions(&self) -> usize {
        if self.bidirectional { 2 } else { 1 }
    }
}

impl RecurrentWeights {
    /// Weights drawn as PyTorch initializes them, uniform in `[-1/√H, 1/√H)`, from `seed`
    /// (each tensor from its own derived seed).
    pub fn init(
        recurrence: Recurrence,
        input_size: usize,
        hidden_size: usize,
        bias: bool,
        seed: u64,
    ) -> RecurrentWeights {
        let rows = recurrence.gates() * hidden_size;
        let bound = 1.0 / (hidden_size as f64).sqrt();
        let draw = |shape: &[usize], k: u64| {
            let seed = seed.wrapping_mul(4).wrapping_add(k);
            Tensor::rand(shape, seed).mul(2.0 * bound).sub(bound)
        };
        RecurrentWeights {
            weight_ih: draw(&[rows, input_size], 0),
            weight_hh: draw(&[rows, hidden_size], 1),
            bias_ih: bias.then(|| draw(&[rows], 2)),
            bias_hh: bias.then(|| draw(&[rows], 3)),
        }
    }

    /// The weights of every layer and direction of a network, in PyTorch's order (`l0`,
    /// `l0_reverse`, `l1`, ...), each drawn as [`RecurrentWeights::init`] does.
    pub fn init_layers(
        recurrence: Recurrence,
        input_size: usize,
        hidden_size: usize,
        bias: bool,
        opts: RecurrentOptions,
        seed: u64,
    ) -> Vec<RecurrentWeights> {
        let d = opts.directions();
        (0..opts.num_layers * d)
            .map(|i| {
                let input = if i < d { input_size } else { d * hidden_size };
                let seed = seed.wrapping_mul(1009).wrapping_add(i as u64);
                RecurrentWeights::init(recurrence, input, hidden_size, bias, seed)
            })
            .collect()
    }

    /// The hidden size `H` (the columns of `weight_hh`).
    pub fn hidden_size(&self) -> usize {
        self.weight_hh.shape().get(1).copied().unwrap_or(0)
    }

    /// The contribution of `h` to every gate: `h · W_hhᵀ + b_hh`.
    fn hidden_gates(&self, h: &Tensor) -> Tensor {
        linear(h, &self.weight_hh, self.bias_hh.as_ref())
    }

    /// The contribution of `x` to every gate: `x · W_ihᵀ + b_ih`.
    fn input_gates(&self, x: &Tensor) -> Tensor {
        linear(x, &self.weight_ih, self.bias_ih.as_ref())
    }

    #[track_caller]
    fn check(&self, op: &str, recurrence: Recurrence, input_size: usize) {
        let h = self.hidden_size();
        let rows = recurrence.gates() * h;
        let shapes_ok = self.weight_ih.shape() == [rows, input_size]
            && self.weight_hh.shape() == [rows, h]
            && [&self.bias_ih, &self.bias_hh]
                .iter()
                .all(|b| b.as_ref().is_none_or(|b| b.shape() == [rows]));
        if !shapes_ok {
            panic!(
                "{op}: weights of shapes weight_ih {:?}, weight_hh {:?}, bias_ih {:?}, bias_hh {:?} \
                 do not fit an input of {input_size} features: expected [{rows}, {input_size}], \
                 [{rows}, {h}] and [{rows}] ({} gates of hidden size {h})",
                self.weight_ih.shape(),
                self.weight_hh.shape(),
                self.bias_ih.as_ref().map(Tensor::shape),
                self.bias_hh.as_ref().map(Tensor::shape),
                recurrence.gates(),
            );
        }
    }
}

/// One step of the tanh RNN: `tanh(x W_ihᵀ + b_ih + h W_hhᵀ + b_hh)`, `x` `[N, I]` (or
/// `[I]`), `h` `[N, H]` (or `[H]`).
#[track_caller]
pub fn rnn_tanh_cell(x: &Tensor, h: &Tensor, w: &RecurrentWeights) -> Tensor {
    one_state_step(Recurrence::RnnTanh, x, h, w)
}

/// One step of the ReLU RNN (as [`rnn_tanh_cell`] with ReLU).
#[track_caller]
pub fn rnn_relu_cell(x: &Tensor, h: &Tensor, w: &RecurrentWeights) -> Tensor {
    one_state_step(Recurrence::RnnRelu, x, h, w)
}

/// One step of PyTorch's `GRUCell`: `r = σ(..)`, `z = σ(..)`, `n = tanh(x W_inᵀ + b_in + r ⊙
/// (h W_hnᵀ + b_hn))`, `h' = (1 - z) ⊙ n + z ⊙ h`.
#[track_caller]
pub fn gru_cell(x: &Tensor, h: &Tensor, w: &RecurrentWeights) -> Tensor {
    one_state_step(Recurrence::Gru, x, h, w)
}

/// One step of a recurrence whose state is `h` alone.
fn one_state_step(recurrence: Recurrence, x: &Tensor, h: &Tensor, w: &RecurrentWeights) -> Tensor {
    cell_step(recurrence, &w.input_gates(x), std::slice::from_ref(h), w).remove(0)
}

/// One step of PyTorch's `LSTMCell`: `(h', c')` from `x` and the state `(h, c)`, gates in
/// the order input, forget, cell, output.
#[track_caller]
pub fn lstm_cell(x: &Tensor, state: (&Tensor, &Tensor), w: &RecurrentWeights) -> (Tensor, Tensor) {
    let mut next = cell_step(
        Recurrence::Lstm,
        &w.input_gates(x),
        &[state.0.clone(), state.1.clone()],
        w,
    );
    let c = next.pop().expect("an LSTM state has a cell");
    (next.pop().expect("an LSTM state has a hidden part"), c)
}

/// The `k`th of `n` equal parts of the last axis of `gates`.
fn gate(gates: &Tensor, k: usize, n: usize) -> Tensor {
    let size = gates.shape().last().copied().unwrap_or(0) / n;
    gates.narrow(-1, (k * size) as isize, size)
}

/// The next state from the input's gate contributions `gi` and the state (`[h]`, or `[h, c]`
/// for an LSTM).
fn cell_step(
    recurrence: Recurrence,
    gi: &Tensor,
    state: &[Tensor],
    w: &RecurrentWeights,
) -> Vec<Tensor> {
    let h = &state[0];
    let gh = w.hidden_gates(h);
    match recurrence {
        Recurrence::RnnTanh => vec![gi.add(&gh).tanh()],
        Recurrence::RnnRelu => vec![gi.add(&gh).relu()],
        Recurrence::Gru => {
            let r = gate(gi, 0, 3).add(gate(&gh, 0, 3)).sigmoid();
            let z = gate(gi, 1, 3).add(gate(&gh, 1, 3)).sigmoid();
            let n = gate(gi, 2, 3).add(r.mul(gate(&gh, 2, 3))).tanh();
            // (1 - z) n + z h, written without a constant.
            vec![n.add(z.mul(h.sub(&n)))]
        }
        Recurrence::Lstm => {
            let g = gi.add(&gh);
            let (i, f) = (gate(&g, 0, 4).sigmoid(), gate(&g, 1, 4).sigmoid());
            let (cell, o) = (gate(&g, 2, 4).tanh(), gate(&g, 3, 4).sigmoid());
            let c = f.mul(&state[1]).add(i.mul(cell));
            vec![o.mul(c.tanh()), c]
        }
    }
}

/// PyTorch's `RNN` (`nonlinearity` tanh or ReLU): `(output, h_n)`. See [`gru`] for the
/// shapes.
///
/// # Panics
///
/// As [`gru`].
#[track_caller]
pub fn rnn(
    input: &Tensor,
    h0: Option<&Tensor>,
    weights: &[RecurrentWeights],
    relu: bool,
    opts: RecurrentOptions,
) -> (Tensor, Tensor) {
    let recurrence = if relu {
        Recurrence::RnnRelu
    } else {
        Recurrence::RnnTanh
    };
    let (out, mut states) = run_layers(
        recurrence,
        input,
        h0.map(|h| vec![h.clone()]),
        weights,
        opts,
    );
    (out, states.remove(0))
}

/// PyTorch's `GRU`: `(output, h_n)`.
///
/// `input` is `[T, N, I]` (`[N, T, I]` with `batch_first`) or unbatched `[T, I]`; `h0` is
/// `[L · D, N, H]` (unbatched `[L · D, H]`), zeros when `None`; `weights` holds `L · D`
/// layers in PyTorch's order (`l0`, `l0_reverse`, `l1`, ...; see
/// [`RecurrentWeights::init_layers`]). `output` is `[T, N, D · H]` (batch first or unbatched
/// as the input), `h_n` the last state of each layer and direction, `[L · D, N, H]`.
///
/// # Panics
///
/// When the input is not 2-D or 3-D, the weights are not `L · D` layers of the right shapes,
/// or `h0` has the wrong shape; the message names the function.
#[track_caller]
pub fn gru(
    input: &Tensor,
    h0: Option<&Tensor>,
    weights: &[RecurrentWeights],
    opts: RecurrentOptions,
) -> (Tensor, Tensor) {
    let (out, mut states) = run_layers(
        Recurrence::Gru,
        input,
        h0.map(|h| vec![h.clone()]),
        weights,
        opts,
    );
    (out, states.remove(0))
}

/// PyTorch's `LSTM`: `(output, (h_n, c_n))`, the state `(h0, c0)` both `[L · D, N, H]` (zeros
/// when `None`). Shapes otherwise as [`gru`].
///
/// # Panics
///
/// As [`gru`].
#[track_caller]
pub fn lstm(
    input: &Tensor,
    state: Option<(&Tensor, &Tensor)>,
    weights: &[RecurrentWeights],
    opts: RecurrentOptions,
) -> (Tensor, (Tensor, Tensor)) {
    let state = state.map(|(h, c)| vec![h.clone(), c.clone()]);
    let (out, mut states) = run_layers(Recurrence::Lstm, input, state, weights, opts);
    let c = states.pop().expect("an LSTM returns its cells");
    (
        out,
        (states.pop().expect("an LSTM returns its hidden states"), c),
    )
}

/// Every layer and direction of `recurrence` over `input`: the output, and the last state of
/// each state part (`[h_n]`, or `[h_n, c_n]`), stacked over layers and directions.
#[track_caller]
fn run_layers(
    recurrence: Recurrence,
    input: &Tensor,
    initial: Option<Vec<Tensor>>,
    weights: &[RecurrentWeights],
    opts: RecurrentOptions,
) -> (Tensor, Vec<Tensor>) {
    let op = recurrence.name();
    let unbatched = match input.ndim() {
        2 => true,
        3 => false,
        _ => panic!(
            "{op}: input of shape {:?}: expected [T, N, features] ([N, T, features] with \
             batch_first) or unbatched [T, features]",
            input.shape()
        ),
    };
    let d = opts.directions();
    if opts.num_layers == 0 || weights.len() != opts.num_layers * d {
        panic!(
            "{op}: {} weight sets for {} layers of {d} direction(s): expected one per layer and \
             direction, in PyTorch's order (see RecurrentWeights::init_layers)",
            weights.len(),
            opts.num_layers
        );
    }
    // Time-major and batched: [T, N, I].
    let mut x = if unbatched {
        input.unsqueeze(1)
    } else if opts.batch_first {
        input.transpose(0, 1)
    } else {
        input.clone()
    };
    let (batch, hidden) = (x.shape()[1], weights[0].hidden_size());
    let parts = if recurrence == Recurrence::Lstm { 2 } else { 1 };
    let initial = initial_states(
        op,
        initial,
        unbatched,
        [opts.num_layers * d, batch, hidden],
        parts,
        input.dtype(),
    );
    let mut last: Vec<Vec<Tensor>> = vec![Vec::new(); parts];
    for layer in 0..opts.num_layers {
        let mut outputs = Vec::with_capacity(d);
        for dir in 0..d {
            let k = layer * d + dir;
            let w = &weights[k];
            w.check(op, recurrence, x.shape()[2]);
            let start: Vec<Tensor> = initial
                .iter()
                .map(|s| s.narrow(0, k as isize, 1).squeeze(0))
                .collect();
            let (end, ys) = run_direction(recurrence, &x, start, w, dir == 1);
            for (part, state) in end.into_iter().enumerate() {
                last[part].push(state);
            }
            outputs.push(ys);
        }
        x = if d == 1 {
            outputs.remove(0)
        } else {
            Tensor::cat(&outputs, -1)
        };
    }
    let output = if unbatched {
        x.squeeze(1)
    } else if opts.batch_first {
        x.transpose(0, 1)
    } else {
        x
    };
    let states = last
        .iter()
        .map(|s| {
            let s = Tensor::stack(s, 0);
            if unbatched { s.squeeze(1) } else { s }
        })
        .collect();
    (output, states)
}

/// The initial state parts, `[L · D, N, H]` each: the user's (batched if the input is
/// unbatched), or zeros.
#[track_caller]
fn initial_states(
    op: &str,
    given: Option<Vec<Tensor>>,
    unbatched: bool,
    shape: [usize; 3],
    parts: usize,
    dtype: DType,
) -> Vec<Tensor> {
    let Some(given) = given else {
        return vec![Tensor::zeros(&shape, dtype); parts];
    };
    given
        .into_iter()
        .map(|s| {
            let s = if unbatched && s.ndim() == 2 {
                s.unsqueeze(1)
            } else {
                s
            };
            if s.shape() != shape {
                let expected: &[usize] = if unbatched {
                    &[shape[0], shape[2]]
                } else {
                    &shape
                };
                panic!(
                    "{op}: initial state of shape {:?}, expected {expected:?} ([layers · \
                     directions, N, H])",
                    s.shape()
                );
            }
            s
        })
        .collect()
}

/// One direction of one layer over `x` `[T, N, I]`: the last state and the outputs `[T, N, H]`.
fn run_direction(
    recurrence: Recurrence,
    x: &Tensor,
    start: Vec<Tensor>,
    w: &RecurrentWeights,
    reverse: bool,
) -> (Vec<Tensor>, Tensor) {
    let gi = w.input_gates(x);
    let steps = gi.shape()[0];
    let order: Vec<usize> = if reverse {
        (0..steps).rev().collect()
    } else {
        (0..steps).collect()
    };
    let mut state = start;
    let mut outputs: Vec<Option<Tensor>> = vec![None; steps];
    for t in order {
        let gi_t = gi.narrow(0, t as isize, 1).squeeze(0);
        state = cell_step(recurrence, &gi_t, &state, w);
        outputs[t] = Some(state[0].clone());
    }
    let outputs: Vec<Tensor> = outputs.into_iter().flatten().collect();
    (state, Tensor::stack(&outputs, 0))
}
