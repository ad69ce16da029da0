"""JAX baseline for bench/train_step.c (an extra column, informational):
the same training steps as torch_train.py, written the way a JAX user
would: the whole step (forward, loss, gradients, SGD update) is one
`jax.jit` function, so XLA compiles it once and fuses it, like kiln.
Timed the same way: median of 50 steps after 10 warm-up steps; each step
turns a fixed host batch into a device array, runs the step and waits
for the new parameters (`block_until_ready`).

Usage: jax_train.py MODEL   (MODEL: mlp, encoder, demo, demo_momentum)
Prints one line: "<median step ms> <peak RSS MiB>". Run by bench/run.sh
from a virtual environment with PyPI's jax[cpu] (made by run.sh when
PyPI is reachable); XLA's CPU client uses every core.

Models (the same as train_step.c and torch_train.py):
  mlp      Linear 784-1024-1024-10 with ReLU, x [128, 784], cross-entropy, SGD lr 0.01
  encoder  post-norm Transformer encoder layer, d_model 256, 4 heads, FF 1024
           with ReLU, dropout 0.1 (train mode), x [16, 128, 256], loss = mean, SGD
  demo     the MLP on [128, 28, 28] (flattened), cross-entropy, AdamW lr 1e-3,
           betas 0.9/0.999, eps 1e-8, weight decay 0.01 (as make demo trains)
  demo_momentum  the same model with SGD momentum 0.9
"""
import sys
import time

import numpy as np
from bench_rss import peak_rss_mib
import jax
import jax.numpy as jnp


def linear_init(key, n_in, n_out):
    # PyTorch's default: U(-1/sqrt(in), 1/sqrt(in)) for weight and bias
    kw, kb = jax.random.split(key)
    bound = 1.0 / np.sqrt(n_in)
    return {"w": jax.random.uniform(kw, (n_in, n_out), jnp.float32, -bound, bound),
            "b": jax.random.uniform(kb, (n_out,), jnp.float32, -bound, bound)}


def linear(p, x):
    return x @ p["w"] + p["b"]


def mlp_init(key):
    k = jax.random.split(key, 3)
    return [linear_init(k[0], 784, 1024), linear_init(k[1], 1024, 1024), linear_init(k[2], 1024, 10)]


def mlp_apply(params, x):
    x = x.reshape(x.shape[0], -1)
    x = jax.nn.relu(linear(params[0], x))
    x = jax.nn.relu(linear(params[1], x))
    return linear(params[2], x)


def cross_entropy(logits, y):
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))


D, H, FF, P_DROP = 256, 4, 1024, 0.1


def encoder_init(key):
    k = jax.random.split(key, 4)
    ln = lambda: {"g": jnp.ones((D,), jnp.float32), "b": jnp.zeros((D,), jnp.float32)}
    return {"qkv": linear_init(k[0], D, 3 * D), "out": linear_init(k[1], D, D),
            "ff1": linear_init(k[2], D, FF), "ff2": linear_init(k[3], FF, D), "ln1": ln(), "ln2": ln()}


def layer_norm(p, x):
    mu = jnp.mean(x, -1, keepdims=True)
    var = jnp.mean((x - mu) ** 2, -1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + 1e-5) * p["g"] + p["b"]


def dropout(key, x):
    keep = jax.random.bernoulli(key, 1.0 - P_DROP, x.shape)
    return jnp.where(keep, x / (1.0 - P_DROP), 0.0)


def encoder_apply(params, x, key):
    k = jax.random.split(key, 4)
    b, s, _ = x.shape
    qkv = linear(params["qkv"], x).reshape(b, s, 3, H, D // H).transpose(2, 0, 3, 1, 4)
    q, kk, v = qkv[0], qkv[1], qkv[2]
    att = jax.nn.softmax(q @ kk.transpose(0, 1, 3, 2) / np.sqrt(D // H), axis=-1)
    att = dropout(k[0], att)
    a = (att @ v).transpose(0, 2, 1, 3).reshape(b, s, D)
    x = layer_norm(params["ln1"], x + dropout(k[1], linear(params["out"], a)))
    f = linear(params["ff2"], dropout(k[2], jax.nn.relu(linear(params["ff1"], x))))
    return layer_norm(params["ln2"], x + dropout(k[3], f))


def main():
    which = sys.argv[1]
    rng = np.random.default_rng(42)
    key = jax.random.PRNGKey(1)
    lr = 0.01
    adamw = which == "demo"
    if which in ("mlp", "demo", "demo_momentum"):
        params = mlp_init(key)
        shape = (128, 784) if which == "mlp" else (128, 28, 28)
        xh = rng.random(shape, dtype=np.float32)
        yh = rng.integers(0, 10, 128).astype(np.int32)
        momentum = 0.9 if which == "demo_momentum" else 0.0
        loss_fn = lambda p, x, y, k: cross_entropy(mlp_apply(p, x), y)
    elif which == "encoder":
        params = encoder_init(key)
        xh = rng.random((16, 128, 256), dtype=np.float32) * 2 - 1
        yh = np.zeros((1,), np.int32)
        momentum = 0.0
        loss_fn = lambda p, x, y, k: jnp.mean(encoder_apply(p, x, k))
    else:
        raise SystemExit(f"jax_train.py: unknown model {which}")
    zeros = lambda: jax.tree_util.tree_map(jnp.zeros_like, params)
    bufs = (zeros(), zeros(), jnp.zeros((), jnp.float32)) if adamw else zeros()

    @jax.jit
    def step(params, bufs, x, y, k):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y, k)
        if adamw:  # torch's AdamW: decoupled weight decay, bias-corrected moments
            m, v, t = bufs
            t = t + 1
            m = jax.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, m, grads)
            v = jax.tree_util.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, v, grads)
            c1, c2 = 1 - 0.9 ** t, 1 - 0.999 ** t
            params = jax.tree_util.tree_map(
                lambda p, m, v: p * (1 - 1e-3 * 0.01) - 1e-3 * (m / c1) / (jnp.sqrt(v / c2) + 1e-8), params, m, v)
            bufs = (m, v, t)
        elif momentum:
            bufs = jax.tree_util.tree_map(lambda m, g: momentum * m + g, bufs, grads)
            params = jax.tree_util.tree_map(lambda p, m: p - lr * m, params, bufs)
        else:
            params = jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)
        return params, bufs, loss

    times = []
    y = jnp.asarray(yh)
    for s in range(60):
        t0 = time.perf_counter()
        x = jnp.asarray(xh.copy())  # a new device array per step, like kiln_from_host
        params, bufs, loss = step(params, bufs, x, y, jax.random.fold_in(key, s))
        jax.block_until_ready((params, bufs, loss))
        if s >= 10:
            times.append(time.perf_counter() - t0)
    if not np.isfinite(float(loss)):
        raise SystemExit("jax_train.py: the loss is not finite")
    times.sort()
    print(f"{(times[24] + times[25]) / 2 * 1e3:.4f} {peak_rss_mib():.1f}")


if __name__ == "__main__":
    main()
