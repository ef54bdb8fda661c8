"""Golden values for transforms over trees, has_aux, and Jacobians in several arguments,
computed by JAX (float32, CPU). Written to trees.json next to this script, in the format of
transforms.json: each case lists its inputs and JAX's outputs flattened with
jax.tree_util.tree_leaves (a namedtuple flattens in field order, as `#[derive(Tree)]` does).

    python3 -m venv .venv && .venv/bin/pip install 'jax[cpu]'   # JAX 0.10.2 made this file
    .venv/bin/python tests/data/gen_trees.py
"""
import collections, json, os
import numpy as np
import jax, jax.numpy as jnp

jax.config.update("jax_platforms", "cpu")
RTOL, ATOL = 1e-4, 1e-5
Params = collections.namedtuple("Params", "w1 b1 w2 b2")
Affine = collections.namedtuple("Affine", "w b")


def arr(rng, *shape):
    return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)


def enc(a):
    a = np.asarray(a)
    vals = [float(np.float32(v)) for v in a.astype(np.float32).reshape(-1).tolist()]
    return {"dtype": "f32", "shape": list(a.shape), "data": vals}


def mlp_loss(p, x, y):
    h = jnp.maximum(x @ p.w1 + p.b1, 0.0)
    logits = h @ p.w2 + p.b2
    return -jnp.sum(y * jax.nn.log_softmax(logits))


def aux_fn(x):
    return jnp.sum(jnp.sin(x) * x), (jnp.mean(x), x * x)


def vec_aux_fn(x):
    return jnp.sin(x) * x[0], (jnp.sum(x),)


def two_args(x, y):
    return jnp.sin(x) * jnp.sum(y * y) + x * y


def scalar_two_args(x, y):
    return jnp.sum(jnp.sin(x) * y * y) + jnp.sum(x) ** 2 * y[0]


def affine_tanh(p, x):
    return jnp.tanh(x @ p.w + p.b)


Out = collections.namedtuple("Out", "y s")


def struct_out(p, x):
    h = jnp.tanh(x @ p.w + p.b)
    return Out(y=h, s=jnp.sum(h * h) + jnp.sum(p.w) ** 2)


def list_out(p, x):
    h = jnp.tanh(x @ p.w + p.b)
    return [h, jnp.sum(h * p.b)]


def struct_scalar(p, x):
    h = jnp.tanh(x @ p.w + p.b)
    return jnp.sum(h * h) + jnp.sum(p.w * p.w * p.b)


def cases():
    r = np.random.RandomState(20)
    out = []

    def case(name, transform, inputs, result):
        leaves = jax.tree_util.tree_leaves(result)
        out.append({"name": name, "transform": transform,
                    "inputs": {k: enc(v) for k, v in inputs.items()},
                    "outputs": [enc(l) for l in leaves]})

    # Per-sample gradients of a two-layer model given as a struct (a namedtuple here).
    w1, b1, w2, b2 = arr(r, 4, 3), arr(r, 3), arr(r, 3, 2), arr(r, 2)
    x = arr(r, 5, 4)
    y = np.eye(2, dtype=np.float32)[r.randint(0, 2, size=5)]
    p = Params(w1, b1, w2, b2)
    ins = dict(w1=w1, b1=b1, w2=w2, b2=b2, x=x, y=y)
    case("per_sample_grads_struct", "vmap(grad(loss), in_axes=(None, 0, 0))", ins,
         jax.vmap(jax.grad(mlp_loss), in_axes=(None, 0, 0))(p, x, y))
    case("per_sample_grads_tree_in_axes",
         "vmap(grad(loss), in_axes=(Params(None, None, None, None), 0, 0))", ins,
         jax.vmap(jax.grad(mlp_loss), in_axes=(Params(None, None, None, None), 0, 0))(p, x, y))
    case("value_and_grad_struct", "value_and_grad(loss)(p, x[0], y[0])", ins,
         jax.value_and_grad(mlp_loss)(p, x[0], y[0]))

    # Tree-shaped in_axes: the bias is batched, the weight is not.
    w, bs, xs = arr(r, 4, 3), arr(r, 6, 3), arr(r, 6, 4)
    case("vmap_tree_in_axes", "vmap(f, in_axes=(Affine(w=None, b=0), 0))",
         dict(w=w, b=bs, x=xs),
         jax.vmap(affine_tanh, in_axes=(Affine(None, 0), 0))(Affine(w, bs), xs))

    # has_aux for each transform.
    xa = arr(r, 4)
    t = arr(r, 4)
    case("grad_has_aux", "grad(f, has_aux=True)", dict(x=xa), jax.grad(aux_fn, has_aux=True)(xa))
    case("value_and_grad_has_aux", "value_and_grad(f, has_aux=True)", dict(x=xa),
         jax.value_and_grad(aux_fn, has_aux=True)(xa))
    case("jacfwd_has_aux", "jacfwd(g, has_aux=True)", dict(x=xa),
         jax.jacfwd(vec_aux_fn, has_aux=True)(xa))
    case("jacrev_has_aux", "jacrev(g, has_aux=True)", dict(x=xa),
         jax.jacrev(vec_aux_fn, has_aux=True)(xa))
    case("hessian_has_aux", "hessian(f, has_aux=True)", dict(x=xa),
         jax.hessian(aux_fn, has_aux=True)(xa))
    case("jvp_has_aux", "jvp(g, (x,), (t,), has_aux=True)", dict(x=xa, t=t),
         jax.jvp(vec_aux_fn, (xa,), (t,), has_aux=True))
    primal, pullback, aux = jax.vjp(vec_aux_fn, xa, has_aux=True)
    case("vjp_has_aux", "vjp(g, x, has_aux=True); pullback(t)", dict(x=xa, t=t),
         (primal, pullback(t), aux))

    # Jacobians in several arguments.
    xj, yj = arr(r, 3), arr(r, 3)
    case("jacrev_argnums_01", "jacrev(f, (0, 1))", dict(x=xj, y=yj),
         jax.jacrev(two_args, (0, 1))(xj, yj))
    case("jacfwd_argnums_01", "jacfwd(f, (0, 1))", dict(x=xj, y=yj),
         jax.jacfwd(two_args, (0, 1))(xj, yj))
    case("hessian_argnums_01", "hessian(f, (0, 1))", dict(x=xj, y=yj),
         jax.hessian(scalar_two_args, (0, 1))(xj, yj))
    case("grad_negative_argnums", "grad(f, argnums=-1)", dict(x=xj, y=yj),
         jax.grad(scalar_two_args, argnums=-1)(xj, yj))

    # Jacobians of struct-valued (and list-valued) functions and Hessians in a struct argument:
    # the output's structure outside, the argument's inside (leaves y.w, y.b, s.w, s.b).
    wo, bo, xo, xos = arr(r, 2, 3), arr(r, 3), arr(r, 2), arr(r, 4, 2)
    po, ins = Affine(wo, bo), dict(w=wo, b=bo, x=xo, xs=xos)
    case("jacrev_struct_output", "jacrev(f)(p, x), f returning Out(y, s)", ins,
         jax.jacrev(struct_out)(po, xo))
    case("jacfwd_struct_output", "jacfwd(f)(p, x), f returning Out(y, s)", ins,
         jax.jacfwd(struct_out)(po, xo))
    case("jacrev_struct_output_argnums_01", "jacrev(f, (0, 1))(p, x)", ins,
         jax.jacrev(struct_out, (0, 1))(po, xo))
    case("jacrev_list_output", "jacrev(f)(p, x), f returning [h, s]", ins,
         jax.jacrev(list_out)(po, xo))
    case("hessian_struct_arg", "hessian(f)(p, x)", ins, jax.hessian(struct_scalar)(po, xo))
    case("vmap_jacrev_struct_output", "vmap(jacrev(f), in_axes=(None, 0))(p, xs)", ins,
         jax.vmap(jax.jacrev(struct_out), in_axes=(None, 0))(po, xos))
    case("hessian_struct_and_tensor_argnums_01", "hessian(f, (0, 1))(p, x)", ins,
         jax.hessian(struct_scalar, (0, 1))(po, xo))
    return out


if __name__ == "__main__":
    doc = {"generator": f"JAX {jax.__version__}, float32, CPU", "rtol": RTOL, "atol": ATOL,
           "note": "outputs are jax.tree_util.tree_leaves of each result", "cases": cases()}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "trees.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"wrote {len(doc['cases'])} cases to {path}")
