//! Transforms over trees (`#[derive(Tree)]` structs, `Vec`s, maps, tuples): JAX's values for
//! per-sample gradients of a model given as a struct, tree-shaped `in_axes`, `has_aux` for
//! each transform and Jacobians in several arguments (tests/data/trees.json, made by
//! tests/data/gen_trees.py; also Jacobians of struct- and list-valued functions and Hessians in
//! struct arguments, nested as JAX nests them), and flatten/unflatten round trips, structure
//! errors naming the path, integer arguments, agreement with the positional API, the typed
//! function API (`tensor::typed`), and `#[function]`s taking and returning trees.

mod common;

use common::panic_message;

use common::golden::{self, Inputs};
use common::values;
use proptest::prelude::*;
use std::collections::BTreeMap;
use tensor::prelude::*;
use tensor::typed::{self, Argnum};
use tensor::{TreeJacobian, tree_structure, tree_unflatten};

#[derive(Clone, Tree)]
struct Params {
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
    b2: Tensor,
}

#[derive(Clone, Tree)]
struct Affine {
    w: Tensor,
    b: Tensor,
}

fn loss(p: &Params, x: &Tensor, y: &Tensor) -> Tensor {
    let hidden = (x.matmul(&p.w1) + &p.b1).relu();
    let logits = hidden.matmul(&p.w2) + &p.b2;
    -(y * logits.log_softmax(-1)).sum_all()
}

/// `x[0]` as a scalar.
fn first(x: &Tensor) -> Tensor {
    x.slice(0, 0, 1).reshape(&[0usize; 0])
}

fn aux_fn(x: &Tensor) -> (Tensor, (Tensor, Tensor)) {
    ((x.sin() * x).sum_all(), (x.mean_all(), x * x))
}

fn vec_aux_fn(x: &Tensor) -> (Tensor, (Tensor,)) {
    (x.sin() * first(x), (x.sum_all(),))
}

fn two_args(x: &Tensor, y: &Tensor) -> Tensor {
    x.sin() * (y * y).sum_all() + x * y
}

fn scalar_two_args(x: &Tensor, y: &Tensor) -> Tensor {
    let s = x.sum_all();
    (x.sin() * y * y).sum_all() + &s * &s * first(y)
}

#[derive(Clone, Tree)]
struct Out {
    y: Tensor,
    s: Tensor,
}

fn struct_out(p: &Affine, x: &Tensor) -> Out {
    let h = (x.matmul(&p.w) + &p.b).tanh();
    let w_sum = p.w.sum_all();
    Out {
        s: (&h * &h).sum_all() + &w_sum * &w_sum,
        y: h,
    }
}

fn list_out(p: &Affine, x: &Tensor) -> Vec<Tensor> {
    let h = (x.matmul(&p.w) + &p.b).tanh();
    let s = (&h * &p.b).sum_all();
    vec![h, s]
}

fn struct_scalar(p: &Affine, x: &Tensor) -> Tensor {
    let h = (x.matmul(&p.w) + &p.b).tanh();
    (&h * &h).sum_all() + (&p.w * &p.w * &p.b).sum_all()
}

fn affine_of(i: &Inputs) -> Affine {
    Affine {
        w: i["w"].clone(),
        b: i["b"].clone(),
    }
}

fn params_of(i: &Inputs) -> Params {
    Params {
        w1: i["w1"].clone(),
        b1: i["b1"].clone(),
        w2: i["w2"].clone(),
        b2: i["b2"].clone(),
    }
}

/// The case's transform, written with the macros over trees, as its flat list of leaves.
fn run_case(name: &str, i: &Inputs) -> Vec<Tensor> {
    let a = |k: &str| i[k].clone();
    match name {
        "per_sample_grads_struct" => {
            let per_sample = vmap!(grad!(loss), in_axes = (None, 0, 0));
            tree_leaves(&per_sample(&params_of(i), &a("x"), &a("y")))
        }
        "per_sample_grads_tree_in_axes" => {
            let per_sample = vmap!(
                grad!(loss),
                in_axes = (
                    Params {
                        w1: None,
                        b1: None,
                        w2: None,
                        b2: None
                    },
                    0,
                    0
                )
            );
            tree_leaves(&per_sample(&params_of(i), &a("x"), &a("y")))
        }
        "value_and_grad_struct" => {
            let (x, y) = (a("x").slice(0, 0, 1), a("y").slice(0, 0, 1));
            let (x, y) = (x.reshape(&[4]), y.reshape(&[2]));
            tree_leaves(&value_and_grad!(loss)(&params_of(i), &x, &y))
        }
        "vmap_tree_in_axes" => {
            let f = |p: &Affine, x: &Tensor| (x.matmul(&p.w) + &p.b).tanh();
            let p = Affine {
                w: a("w"),
                b: a("b"),
            };
            tree_leaves(&vmap!(f, in_axes = (Affine { w: None, b: 0 }, 0))(
                &p,
                &a("x"),
            ))
        }
        "grad_has_aux" => tree_leaves(&grad!(aux_fn, has_aux = true)(&a("x"))),
        "value_and_grad_has_aux" => tree_leaves(&value_and_grad!(aux_fn, has_aux = true)(&a("x"))),
        "jacfwd_has_aux" => tree_leaves(&jacfwd!(vec_aux_fn, has_aux = true)(&a("x"))),
        "jacrev_has_aux" => tree_leaves(&jacrev!(vec_aux_fn, has_aux = true)(&a("x"))),
        "hessian_has_aux" => tree_leaves(&hessian!(aux_fn, has_aux = true)(&a("x"))),
        "jvp_has_aux" => tree_leaves(&jvp!(vec_aux_fn, (a("x"),), (a("t"),), has_aux = true)),
        "vjp_has_aux" => {
            let (out, pullback, aux) = vjp!(vec_aux_fn, (a("x"),), has_aux = true);
            tree_leaves(&(out, pullback(&a("t")), aux))
        }
        "jacrev_argnums_01" => tree_leaves(&jacrev!(two_args, argnums = (0, 1))(&a("x"), &a("y"))),
        "jacfwd_argnums_01" => tree_leaves(&jacfwd!(two_args, argnums = (0, 1))(&a("x"), &a("y"))),
        "hessian_argnums_01" => tree_leaves(&hessian!(scalar_two_args, argnums = (0, 1))(
            &a("x"),
            &a("y"),
        )),
        "grad_negative_argnums" => {
            vec![grad!(scalar_two_args, argnums = -1)(&a("x"), &a("y"))]
        }
        // Struct-valued outputs, through the macros and through tensor::typed.
        "jacrev_struct_output" => {
            let j: TreeJacobian<Out, Affine> = jacrev!(struct_out)(&affine_of(i), &a("x"));
            tree_leaves(&j)
        }
        "jacfwd_struct_output" => tree_leaves(&typed::jacfwd(struct_out, Argnum::<0>)(
            &affine_of(i),
            &a("x"),
        )),
        "jacrev_struct_output_argnums_01" => {
            let j: TreeJacobian<Out, (Affine, Tensor)> =
                jacrev!(struct_out, argnums = (0, 1))(&affine_of(i), &a("x"));
            tree_leaves(&j)
        }
        "jacrev_list_output" => {
            let j: Vec<Affine> = typed::jacrev(list_out, Argnum::<0>)(&affine_of(i), &a("x"));
            tree_leaves(&j)
        }
        "hessian_struct_arg" => {
            let h: TreeJacobian<Affine, Affine> = hessian!(struct_scalar)(&affine_of(i), &a("x"));
            tree_leaves(&h)
        }
        "hessian_struct_and_tensor_argnums_01" => {
            type Blocks = (TreeJacobian<Affine, (Affine, Tensor)>, (Affine, Tensor));
            let h: Blocks = hessian!(struct_scalar, argnums = (0, 1))(&affine_of(i), &a("x"));
            tree_leaves(&h)
        }
        "vmap_jacrev_struct_output" => {
            let per_sample = vmap!(jacrev!(struct_out), in_axes = (None, 0));
            tree_leaves(&per_sample(&affine_of(i), &a("xs")))
        }
        other => panic!("no builder for golden case {other}"),
    }
}

#[test]
fn tree_transforms_match_jax() {
    golden::check_cases_in("trees.json", "trees", run_case);
}

// ---------------------------------------------------------------------------------------------
// Round trips.

#[derive(Clone, Tree)]
struct Layer {
    weight: Tensor,
    bias: Option<Tensor>,
}

#[derive(Clone, Tree)]
struct Model {
    layers: Vec<Layer>,
    embed: (Tensor, [Tensor; 2]),
    extra: BTreeMap<String, Tensor>,
    head: Affine,
    #[tree(static)]
    name: String,
    #[tree(static)]
    rate: u32,
}

fn leaf(seed: u64, n: usize) -> Tensor {
    Tensor::rand(&[n], seed)
}

fn model(layers: &[(usize, bool)], keys: &[String], rate: u32) -> Model {
    let mut seed = 0;
    let mut next = |n| {
        seed += 1;
        leaf(seed, n)
    };
    Model {
        layers: layers
            .iter()
            .map(|&(n, has_bias)| Layer {
                weight: next(n),
                bias: has_bias.then(|| next(n)),
            })
            .collect(),
        embed: (next(2), [next(1), next(3)]),
        extra: keys.iter().map(|k| (k.clone(), next(2))).collect(),
        head: Affine {
            w: next(4),
            b: next(1),
        },
        name: format!("model-{rate}"),
        rate,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn flatten_then_unflatten_is_the_identity(
        layers in proptest::collection::vec((1usize..4, any::<bool>()), 0..5),
        keys in proptest::collection::btree_set("[a-z]{1,4}", 0..4),
        rate in any::<u32>(),
    ) {
        let keys: Vec<String> = keys.into_iter().collect();
        let m = model(&layers, &keys, rate);
        let (def, leaves) = (tree_structure(&m), tree_leaves(&m));
        let bias_count = layers.iter().filter(|l| l.1).count();
        prop_assert_eq!(leaves.len(), layers.len() + bias_count + 3 + keys.len() + 2);
        prop_assert_eq!(def.num_leaves(), leaves.len());
        let back: Model = tree_unflatten(&def, leaves.clone());
        prop_assert!(tree_structure(&back) == def);
        prop_assert_eq!(&back.name, &m.name);
        prop_assert_eq!(back.rate, rate);
        let again = tree_leaves(&back);
        prop_assert!(again.iter().zip(&leaves).all(|(a, b)| a.uop() == b.uop()));
        // The same for the containers on their own.
        let v: Vec<Layer> = tree_unflatten(&tree_structure(&m.layers), tree_leaves(&m.layers));
        prop_assert_eq!(tree_leaves(&v).len(), tree_leaves(&m.layers).len());
        let e: BTreeMap<String, Tensor> = tree_unflatten(&tree_structure(&m.extra), tree_leaves(&m.extra));
        prop_assert!(e.keys().eq(m.extra.keys()));
    }
}

#[test]
fn leaf_paths_name_fields_indices_and_keys() {
    let m = model(&[(2, false), (1, true)], &["k".to_string()], 3);
    let paths = tree_structure(&m).leaf_paths("model");
    assert_eq!(
        paths,
        [
            "model.layers[0].weight",
            "model.layers[1].weight",
            "model.layers[1].bias",
            "model.embed[0]",
            "model.embed[1][0]",
            "model.embed[1][1]",
            "model.extra[\"k\"]",
            "model.head.w",
            "model.head.b",
        ]
    );
}

#[test]
fn mismatched_structures_name_the_path() {
    let a = model(&[(2, true), (1, true), (3, true)], &[], 1);
    let b = model(&[(2, true), (1, true), (3, false)], &[], 1);
    let msg = panic_message(|| {
        tree_add(&a, &b);
    });
    assert!(msg.contains("tree.layers[2].bias"), "{msg}");
    let c = model(&[(2, true)], &[], 1);
    let msg = panic_message(|| {
        tree_sub(&a, &c);
    });
    assert!(msg.contains("tree.layers: Vec of 3 vs Vec of 1"), "{msg}");
    let d = model(&[(2, true), (1, true), (3, true)], &[], 2);
    let msg = panic_message(|| {
        tree_add(&a, &d);
    });
    assert!(msg.contains("static fields differ"), "{msg}");
}

// ---------------------------------------------------------------------------------------------
// Transforms over trees against the positional API.

fn small_params(seed: u64) -> Params {
    Params {
        w1: Tensor::randn(&[4, 3], seed),
        b1: Tensor::randn(&[3], seed + 1),
        w2: Tensor::randn(&[3, 2], seed + 2),
        b2: Tensor::randn(&[2], seed + 3),
    }
}

fn close(a: &Tensor, b: &Tensor) {
    let (a, b) = (values(a), values(b));
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert!((x - y).abs() <= 1e-5 + 1e-4 * y.abs(), "{x} vs {y}");
    }
}

#[test]
fn grad_of_a_struct_equals_the_positional_gradients() {
    let p = small_params(1);
    let x = Tensor::randn(&[5, 4], 9);
    let y = Tensor::randn(&[5, 2], 10).softmax(-1);
    let g: Params = grad!(loss)(&p, &x, &y);
    let positional =
        |w1: &Tensor, b1: &Tensor, w2: &Tensor, b2: &Tensor, x: &Tensor, y: &Tensor| {
            let p = Params {
                w1: w1.clone(),
                b1: b1.clone(),
                w2: w2.clone(),
                b2: b2.clone(),
            };
            loss(&p, x, y)
        };
    let flat = tensor::grad(positional, [0, 1, 2, 3]).call(&[
        p.w1.clone(),
        p.b1.clone(),
        p.w2.clone(),
        p.b2.clone(),
        x.clone(),
        y.clone(),
    ]);
    for (a, b) in tree_leaves(&g).iter().zip(&flat) {
        close(a, b);
    }
}

/// A per-sample gradient function, as the macros type it.
type PerSample = Box<dyn Fn(&Params, &Tensor, &Tensor) -> Params + Send + Sync>;

#[test]
fn per_sample_gradients_of_a_struct_by_every_method_equal_a_loop() {
    let p = small_params(3);
    let x = Tensor::randn(&[7, 4], 11);
    let y = Tensor::randn(&[7, 2], 12).softmax(-1);
    // Each sample realized on its own, so the loop's gradients are one plan replayed.
    let sample = |t: &Tensor, i: isize, n: usize| {
        let s = t.slice(0, i, i + 1).reshape(&[n]);
        s.realize().expect("a sample computes");
        s
    };
    let by_loop: Vec<Params> = (0..7)
        .map(|i| grad!(loss)(&p, &sample(&x, i, 4), &sample(&y, i, 2)))
        .collect();
    let methods: [PerSample; 3] = [
        vmap!(grad!(loss), in_axes = (None, 0, 0)),
        vmap!(grad!(loss), in_axes = (None, 0, 0), method = range),
        vmap!(grad!(loss), in_axes = (None, 0, 0), method = pad_reduce),
    ];
    for per_sample in &methods {
        let g = per_sample(&p, &x, &y);
        tensor::runtime::realize::realize(&tree_leaves(&g).iter().collect::<Vec<_>>())
            .expect("the per-sample gradients compute");
        for (k, batched) in tree_leaves(&g).iter().enumerate() {
            let got = values(batched);
            let per_sample_len = got.len() / 7;
            for (i, want) in by_loop.iter().enumerate() {
                let want = values(&tree_leaves(want)[k]);
                let got = &got[i * per_sample_len..(i + 1) * per_sample_len];
                for (a, b) in got.iter().zip(&want) {
                    assert!((a - b).abs() <= 1e-5 + 1e-4 * b.abs(), "{a} vs {b}");
                }
            }
        }
    }
}

#[test]
fn out_axes_as_a_tree_places_each_result() {
    let p = Affine {
        w: Tensor::randn(&[4, 3], 1),
        b: Tensor::randn(&[3], 2),
    };
    let x = Tensor::randn(&[5, 4], 3);
    let f = |p: &Affine, x: &Tensor| (x.matmul(&p.w), p.b.clone());
    let (batched, unbatched) = vmap!(f, in_axes = (None, 0), out_axes = (1, None))(&p, &x);
    assert_eq!(batched.shape(), vec![3, 5]);
    close(&batched, &x.matmul(&p.w).permute(&[1, 0]));
    close(&unbatched, &p.b);
}

#[test]
fn an_sgd_step_on_a_struct_lowers_the_loss() {
    let p = small_params(5);
    let x = Tensor::randn(&[8, 4], 6);
    let y = Tensor::randn(&[8, 2], 7).softmax(-1);
    let (value, g) = value_and_grad!(loss)(&p, &x, &y);
    let stepped = tree_sub(&p, &tree_scale(&g, 0.01));
    let after = loss(&stepped, &x, &y);
    let norm_sq = values(&tree_vdot(&g, &g))[0];
    // A small step lowers the loss by about lr * |g|^2.
    let drop = values(&value)[0] - values(&after)[0];
    assert!(drop > 0.5 * 0.01 * norm_sq, "drop {drop}, |g|^2 {norm_sq}");
}

#[test]
fn jvp_and_vjp_take_trees() {
    let p = small_params(8);
    let x = Tensor::randn(&[3, 4], 9);
    let y = Tensor::randn(&[3, 2], 10).softmax(-1);
    let t = tree_map(&p, |l| Tensor::randn(&l.shape(), 20) * 1.0);
    let zx = x.zeros_like();
    let zy = y.zeros_like();
    let (value, tangent) = jvp!(loss, (&p, &x, &y), (&t, &zx, &zy));
    let (value2, pullback) = vjp!(loss, (&p, &x, &y));
    close(&value, &value2);
    let (gp, _, _) = pullback(&Tensor::ones(&[0usize; 0], DType::F32));
    // <J t, 1> = <t, J^T 1>.
    close(&tangent, &tree_vdot(&t, &gp));
}

#[test]
fn negative_argnums_count_from_the_end() {
    let x = Tensor::randn(&[3], 1);
    let y = Tensor::randn(&[3], 2);
    let by_neg = grad!(scalar_two_args, argnums = (-2, -1))(&x, &y);
    let by_pos = grad!(scalar_two_args, argnums = (0, 1))(&x, &y);
    close(&by_neg.0, &by_pos.0);
    close(&by_neg.1, &by_pos.1);
    let plain = tensor::grad(scalar_two_args, -1).call(&[x.clone(), y.clone()]);
    close(&plain[0], &by_pos.1);
    let msg = panic_message(|| {
        tensor::grad(scalar_two_args, -3).call(&[x.clone(), y.clone()]);
    });
    assert!(msg.contains("argnums -3 is out of range"), "{msg}");
}

#[derive(Clone, Tree)]
struct Counted {
    w: Tensor,
    steps: Tensor,
}

#[test]
fn integer_arguments_are_an_error_naming_them_unless_allow_int() {
    let c = Counted {
        w: Tensor::randn(&[3], 1),
        steps: Tensor::from_vec(vec![1i32, 2, 3], &[3]),
    };
    let f = |c: &Counted| (&c.w * c.steps.cast(DType::F32)).sum_all();
    let msg = panic_message(|| {
        grad!(f)(&c);
    });
    assert!(msg.contains("argument 0.steps is i32"), "{msg}");
    assert!(msg.contains("allow_int"), "{msg}");
    let g: Counted = grad!(f, allow_int = true)(&c);
    close(&g.w, &c.steps.cast(DType::F32));
    assert_eq!(g.steps.dtype(), DType::I32);
    assert_eq!(values(&g.steps), vec![0.0; 3]);
    // The plain API: an integer argument by position.
    let h = |x: &Tensor, n: &Tensor| (x * n.cast(DType::F32)).sum_all();
    let n = Tensor::from_vec(vec![4i32, 5, 6], &[3]);
    let msg = panic_message(|| {
        tensor::grad(h, [0, 1]).call(&[c.w.clone(), n.clone()]);
    });
    assert!(msg.contains("argument 1 is i32"), "{msg}");
    let both = tensor::grad_with(h, [0, 1], true).call(&[c.w.clone(), n.clone()]);
    close(&both[0], &n.cast(DType::F32));
    assert_eq!(values(&both[1]), vec![0.0; 3]);
}

#[test]
fn has_aux_needs_a_pair_and_passes_aux_through_vmap() {
    let xs = Tensor::randn(&[4, 3], 1);
    let per_sample = vmap!(grad!(aux_fn, has_aux = true));
    let (g, (mean, sq)) = per_sample(&xs);
    assert_eq!(g.shape(), vec![4, 3]);
    close(&mean, &xs.mean(1, false));
    close(&sq, &(&xs * &xs));
    close(&g, &(xs.cos() * &xs + xs.sin()));
}

#[test]
fn jacobians_over_a_struct_argument_are_shaped_like_it() {
    let p = Affine {
        w: Tensor::randn(&[2, 3], 1),
        b: Tensor::randn(&[3], 2),
    };
    let x = Tensor::randn(&[2], 3);
    let f = |p: &Affine, x: &Tensor| (x.matmul(&p.w) + &p.b).tanh();
    let j: Affine = jacrev!(f)(&p, &x);
    let jf: Affine = jacfwd!(f)(&p, &x);
    assert_eq!(j.w.shape(), vec![3, 2, 3]);
    assert_eq!(j.b.shape(), vec![3, 3]);
    close(&j.w, &jf.w);
    close(&j.b, &jf.b);
}

// ---------------------------------------------------------------------------------------------
// #[function] over trees.

#[function]
fn affine_loss(p: &Affine, x: &Tensor) -> Tensor {
    (x.matmul(&p.w) + &p.b).tanh().sum_all()
}

#[function]
fn total(m: &BTreeMap<String, Tensor>) -> Tensor {
    m.values()
        .fold(Tensor::zeros(&[0usize; 0], DType::F32), |acc, t| {
            acc + t.sum_all()
        })
}

#[test]
fn a_function_takes_trees_and_traces_once_per_signature_and_structure() {
    let p = Affine {
        w: Tensor::randn(&[4, 3], 1),
        b: Tensor::randn(&[3], 2),
    };
    let x = Tensor::randn(&[4], 3);
    let direct = |p: &Affine, x: &Tensor| (x.matmul(&p.w) + &p.b).tanh().sum_all();
    close(&affine_loss(&p, &x), &direct(&p, &x));
    let q = tree_scale(&p, 2.0);
    close(&affine_loss(&q, &x), &direct(&q, &x));
    assert_eq!(affine_loss::trace_count(), 1);
    let g: Affine = grad!(affine_loss)(&p, &x);
    let want: Affine = grad!(direct)(&p, &x);
    close(&g.w, &want.w);
    close(&g.b, &want.b);

    let one = Tensor::ones(&[2], DType::F32);
    let map = |keys: [&str; 2]| -> BTreeMap<String, Tensor> {
        keys.iter().map(|k| (k.to_string(), one.clone())).collect()
    };
    assert_eq!(values(&total(&map(["a", "b"]))), vec![4.0]);
    assert_eq!(values(&total(&map(["a", "b"]))), vec![4.0]);
    assert_eq!(total::trace_count(), 1);
    // Same leaves, other keys: another structure, traced again.
    assert_eq!(values(&total(&map(["a", "c"]))), vec![4.0]);
    assert_eq!(total::trace_count(), 2);
}

// ---------------------------------------------------------------------------------------------
// The typed function API (tensor::typed) and struct-valued Jacobians.

#[test]
fn typed_functions_take_and_return_trees_as_the_macros_do() {
    let p = small_params(21);
    let x = Tensor::randn(&[6, 4], 22);
    let y = Tensor::randn(&[6, 2], 23).softmax(-1);
    let by_closure = |p: &Params, x: &Tensor, y: &Tensor| loss(p, x, y);
    let g: Params = typed::grad(by_closure, Argnum::<0>)(&p, &x, &y);
    let want: Params = grad!(loss)(&p, &x, &y);
    for (a, b) in tree_leaves(&g).iter().zip(&tree_leaves(&want)) {
        close(a, b);
    }
    // value_and_grad in two argnums, one of them negative.
    let (value, (gp, gy)) = typed::value_and_grad(loss, (Argnum::<0>, Argnum::<-1>))(&p, &x, &y);
    close(&value, &loss(&p, &x, &y));
    close(&gp.b2, &want.b2);
    let gy_want = grad!(loss, argnums = 2)(&p, &x, &y);
    close(&gy, &gy_want);
    // Per-sample gradients with a struct in_axes, by every method.
    let in_axes = (
        typed::fields(&[("w1", None), ("b1", None), ("w2", None), ("b2", None)]),
        0,
        0,
    );
    let per_sample = typed::vmap(typed::grad(loss, Argnum::<0>), in_axes.clone(), 0);
    let g_batched: Params = per_sample(&p, &x, &y);
    let macro_batched: Params = vmap!(grad!(loss), in_axes = (None, 0, 0))(&p, &x, &y);
    let pad = typed::vmap_with(
        typed::grad(loss, Argnum::<0>),
        in_axes,
        0,
        typed::VmapMethod::PadReduce,
    )(&p, &x, &y);
    for ((a, b), c) in tree_leaves(&g_batched)
        .iter()
        .zip(&tree_leaves(&macro_batched))
        .zip(&tree_leaves(&pad))
    {
        assert_eq!(a.shape()[0], 6);
        close(a, b);
        close(c, b);
    }
}

#[test]
fn typed_grad_of_a_tuple_with_a_vec_equals_the_positional_gradients() {
    // A tree that is not a struct: (Tensor, Vec<Tensor>).
    let f = |p: &(Tensor, Vec<Tensor>), x: &Tensor| {
        let (scale, layers) = p;
        layers
            .iter()
            .fold(x * scale, |h, w| h.matmul(w).tanh())
            .sum_all()
    };
    let scale = Tensor::randn(&[3], 1);
    let layers = vec![Tensor::randn(&[3, 3], 2), Tensor::randn(&[3, 2], 3)];
    let x = Tensor::randn(&[3], 4);
    let p = (scale.clone(), layers.clone());
    let (gs, gl): (Tensor, Vec<Tensor>) = typed::grad(f, Argnum::<0>)(&p, &x);
    assert_eq!(gl.len(), 2);
    let positional = move |s: &Tensor, w0: &Tensor, w1: &Tensor, x: &Tensor| {
        f(&(s.clone(), vec![w0.clone(), w1.clone()]), x)
    };
    let flat = tensor::grad(positional, [0, 1, 2]).call(&[
        scale,
        layers[0].clone(),
        layers[1].clone(),
        x.clone(),
    ]);
    close(&gs, &flat[0]);
    close(&gl[0], &flat[1]);
    close(&gl[1], &flat[2]);
    // jvp and vjp with tree primals agree: <J t, 1> = <t, J^T 1>.
    let t = (
        Tensor::randn(&[3], 5),
        vec![Tensor::randn(&[3, 3], 6), Tensor::randn(&[3, 2], 7)],
    );
    let (value, tangent) = typed::jvp(f, (p.clone(), x.clone()), (t.clone(), x.zeros_like()));
    let (value2, pullback) = typed::vjp(f, (p.clone(), x.clone()));
    close(&value, &value2);
    let (cp, _) = pullback(&Tensor::ones(&[0usize; 0], DType::F32));
    close(&tangent, &tree_vdot(&t, &cp));
    // has_aux through the typed API.
    let with_aux = move |p: &(Tensor, Vec<Tensor>), x: &Tensor| (f(p, x), p.0.sum_all());
    let (g_aux, aux) = typed::grad_aux(with_aux, Argnum::<0>)(&p, &x);
    close(&g_aux.0, &gs);
    close(&aux, &p.0.sum_all());
}

#[test]
fn struct_jacobians_are_read_by_field_and_equal_the_positional_blocks() {
    let p = Affine {
        w: Tensor::randn(&[2, 3], 31),
        b: Tensor::randn(&[3], 32),
    };
    let x = Tensor::randn(&[2], 33);
    let j: TreeJacobian<Out, Affine> = jacrev!(struct_out)(&p, &x);
    let jf = typed::jacfwd(struct_out, Argnum::<0>)(&p, &x);
    assert_eq!(j.rows().len(), 2);
    assert_eq!(j.of(|o| &o.y).w.shape(), vec![3, 2, 3]);
    assert_eq!(j.of(|o| &o.s).b.shape(), vec![3]);
    // The column of w, shaped like the output.
    let dw: Out = j.wrt(|a| &a.w);
    assert_eq!(dw.y.shape(), vec![3, 2, 3]);
    assert_eq!(dw.s.shape(), vec![2, 3]);
    // Every block equals the positional Jacobian of that output leaf in that input leaf.
    let positional = |w: &Tensor, b: &Tensor, x: &Tensor| {
        let o = struct_out(
            &Affine {
                w: w.clone(),
                b: b.clone(),
            },
            x,
        );
        (o.y, o.s)
    };
    let flat = tensor::jacrev(positional, [0, 1]).call(&[p.w.clone(), p.b.clone(), x.clone()]);
    for (k, block) in tree_leaves(&j).iter().enumerate() {
        close(block, &flat[k]);
        close(&tree_leaves(&jf)[k], &flat[k]);
    }
    // has_aux with a struct result: (jacobian, aux).
    let with_aux = |p: &Affine, x: &Tensor| (struct_out(p, x), x.sum_all());
    let (ja, aux) = jacrev!(with_aux, has_aux = true)(&p, &x);
    close(&aux, &x.sum_all());
    for (a, b) in tree_leaves(&ja).iter().zip(&tree_leaves(&j)) {
        close(a, b);
    }
    // The Hessian in a struct argument: nested blocks, symmetric across the diagonal.
    let h = typed::hessian(struct_scalar, Argnum::<0>)(&p, &x);
    let hwb = &h.of(|a| &a.w).b; // d2/dw db: [2, 3, 3]
    let hbw = &h.of(|a| &a.b).w; // d2/db dw: [3, 2, 3]
    assert_eq!(hwb.shape(), vec![2, 3, 3]);
    close(hwb, &hbw.permute(&[1, 2, 0]));
    // ... and equals jacfwd of jacrev, typed the same way.
    let nested: TreeJacobian<Affine, Affine> = jacfwd!(jacrev!(struct_scalar))(&p, &x);
    for (a, b) in tree_leaves(&nested).iter().zip(&tree_leaves(&h)) {
        close(a, b);
    }
}

#[test]
fn typed_options_allow_int_jit_and_picking_a_foreign_tensor() {
    let c = Counted {
        w: Tensor::randn(&[3], 41),
        steps: Tensor::from_vec(vec![1i32, 2, 3], &[3]),
    };
    let f = |c: &Counted| (&c.w * c.steps.cast(DType::F32)).sum_all();
    let msg = panic_message(|| {
        typed::grad(f, Argnum::<0>)(&c);
    });
    assert!(msg.contains("argument 0.steps is i32"), "{msg}");
    let (value, g) = typed::value_and_grad_with(f, Argnum::<0>, true)(&c);
    close(&value, &f(&c));
    close(&g.w, &c.steps.cast(DType::F32));
    assert_eq!(values(&g.steps), vec![0.0; 3]);
    // jit, typed like the function.
    let p = small_params(42);
    let x = Tensor::randn(&[2, 4], 43);
    let y = Tensor::randn(&[2, 2], 44).softmax(-1);
    let fast = typed::jit(typed::grad(loss, Argnum::<0>));
    let want: Params = grad!(loss)(&p, &x, &y);
    for (a, b) in tree_leaves(&fast(&p, &x, &y))
        .iter()
        .zip(&tree_leaves(&want))
    {
        close(a, b);
    }
    // A TreeJacobian read by a tensor that is not one of the output's is an error.
    let q = Affine {
        w: Tensor::randn(&[2, 3], 45),
        b: Tensor::randn(&[3], 46),
    };
    let j = typed::jacrev(struct_out, Argnum::<0>)(&q, &Tensor::randn(&[2], 47));
    // (`of`'s pick returns a borrow of its argument, so an outside tensor must be 'static.)
    let foreign: &'static Tensor = Box::leak(Box::new(Tensor::zeros(&[3], DType::F32)));
    let msg = panic_message(std::panic::AssertUnwindSafe(|| {
        j.of(|_| foreign);
    }));
    assert!(msg.contains("pick a tensor of the output"), "{msg}");
}

#[function]
fn affine_out(p: &Affine, x: &Tensor) -> Out {
    struct_out(p, x)
}

#[function]
fn powers(x: &Tensor, n: Vec<Tensor>) -> Vec<Tensor> {
    n.iter().map(|k| x * k).collect()
}

#[test]
fn a_function_returns_trees_traced_once_per_signature() {
    let p = Affine {
        w: Tensor::randn(&[2, 3], 51),
        b: Tensor::randn(&[3], 52),
    };
    let x = Tensor::randn(&[2], 53);
    let want = struct_out(&p, &x);
    for _ in 0..2 {
        let got: Out = affine_out(&p, &x);
        close(&got.y, &want.y);
        close(&got.s, &want.s);
    }
    assert_eq!(affine_out::trace_count(), 1);
    // Transforms of it: a struct-valued Jacobian, and vmap keeps the struct.
    let j: TreeJacobian<Out, Affine> = jacrev!(affine_out)(&p, &x);
    let direct: TreeJacobian<Out, Affine> = jacrev!(struct_out)(&p, &x);
    for (a, b) in tree_leaves(&j).iter().zip(&tree_leaves(&direct)) {
        close(a, b);
    }
    let xs = Tensor::randn(&[4, 2], 54);
    let batched: Out = vmap!(affine_out, in_axes = (None, 0))(&p, &xs);
    assert_eq!(batched.y.shape(), vec![4, 3]);
    assert_eq!(batched.s.shape(), vec![4]);
    // A Vec result whose length follows the argument's structure: traced per structure.
    let k = |v: f32| Tensor::full(&[0usize; 0], v, DType::F32);
    let two = powers(&x, vec![k(1.0), k(2.0)]);
    let three = powers(&x, vec![k(1.0), k(2.0), k(3.0)]);
    assert_eq!((two.len(), three.len()), (2, 3));
    close(&three[2], &(&x * 3.0));
    assert_eq!(powers::trace_count(), 2);
}
