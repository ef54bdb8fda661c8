//! Neural-network functions under the names of `torch.nn.functional` and `jax.nn`, with
//! torch's argument names and layouts (channels first: `[N, C, *spatial]`). Where torch takes
//! one sample without its batch axis (`conv2d` of `[C, H, W]`, `cross_entropy` of `[C]` logits
//! and a 0-d class), so do these; a shape error names the function called.
//!
//! Every function is a composition of `Tensor` ops, so fusion and every transform (the three
//! vmap methods, jvp, vjp, Jacobians) apply with no rule of its own. Windowed ops (convolution,
//! pooling, `unfold`) share one lowering, [`windows`]: pad, then one strided, dilated view per
//! kernel offset, stacked into trailing window axes, which the scheduler fuses into the
//! consuming reduction (no im2col buffer unless it decides to realize one).
//!
//! | file | what |
//! |---|---|
//! | `windows` | sliding windows over the spatial axes, and `Spatial` arguments |
//! | `conv` | `conv1d/2d/3d`, `conv_transpose1d/2d/3d`, `unfold` |
//! | `pool` | `max_pool*`, `avg_pool*`, `max_unpool2d` |
//! | `resample` | `adaptive_avg_pool*`, `interpolate` (separable matrices per axis) |
//! | `norm` | `layer_norm`, `rms_norm`, `group_norm`, `batch_norm` |
//! | `activation` | `relu6` … `logsigmoid`, `gelu`, `erf`/`erfc` |
//! | `loss` | `cross_entropy`, `nll_loss`, BCE, regression losses, `kl_div` |
//! | `layers` | `linear`, `embedding`, `dropout`, `scaled_dot_product_attention` |
//! | `embedding_bag` | `embedding_bag`: rows reduced per bag (sum, mean, max), offsets as data |
//! | `unbatched` | torch's unbatched forms (one sample, no batch axis) through the batched path |
//! | `recurrent` | `rnn`, `gru`, `lstm` and their cells, PyTorch's weights and layouts |

mod activation;
mod conv;
mod embedding_bag;
mod layers;
mod loss;
mod norm;
mod pool;
mod recurrent;
mod resample;
mod unbatched;
mod windows;

pub use activation::*;
pub use conv::*;
pub use embedding_bag::*;
pub use layers::*;
pub use loss::*;
pub use norm::*;
pub use pool::*;
pub use recurrent::*;
pub use resample::*;
pub use windows::{Padding, Spatial, windows, windows_taps_first};
