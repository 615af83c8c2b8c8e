"""The workloads the benchmark scripts run: NumPy-style functions aicc compiles (and NumPy runs),
and for the fusion workloads of issue 5 the same computation in torch and as an ONNX graph.

    softmax, layernorm                 NumPy, the row-wise kernels
    gelu_linear(x, w, b)               gelu(x @ w + b), tanh form
    causal_attention(L, E)             softmax(q k^T / sqrt(E), causal) v over a head dim
    encoder_layer(p)                   post-norm transformer encoder layer (self-attention,
                                       add & norm, ReLU FFN, add & norm), written out, on
                                       (S, D) or (batch, S, D)
    mlp(p)                             the MLP 784-512-512-10 (ReLU)
    mlp_params, cnn_params, encoder_params   seeded NumPy weights of the model workloads, which
                                       models.py loads into torch.nn.Modules
Each `*_torch` builds the torch eager function (written out, no fused fast path, except
attention, whose peer is torch's own scaled_dot_product_attention); each `*_onnx` an
onnx.ModelProto with opset 20 ops.
"""

import math

import numpy as np

from compiler import ops

LN_EPS = 1e-5


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x):
    mean = x.mean(axis=-1, keepdims=True)
    d = x - mean
    var = (d * d).mean(axis=-1, keepdims=True)
    return d / np.sqrt(var + np.float32(LN_EPS))


_C = np.float32(math.sqrt(2 / math.pi))


def gelu_linear(x, w, b):
    """gelu(x @ w + b): aicc traces ops.gelu as one op."""
    return ops.gelu(x @ w + b, approximate="tanh")


def gelu_linear_numpy(x, w, b):
    """The same in plain NumPy float32 (ops.gelu would evaluate in float64)."""
    y = x @ w + b
    return np.float32(0.5) * y * (1 + np.tanh(_C * (y + np.float32(0.044715) * y * y * y)))


def causal_attention(L, E):
    """q, k, v: (heads, L, E)."""
    mask = np.tril(np.ones((L, L), bool))
    scale = np.float32(1 / math.sqrt(E))

    def attention(q, k, v):
        s = np.where(mask, q @ k.transpose(0, 2, 1) * scale, np.float32(-np.inf))
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)) @ v

    return attention


def _weights(seed):
    """w(*shape): seeded float32 normals, scaled by 1/sqrt(fan-in) (shape[0]) unless given."""
    rng = np.random.default_rng(seed)

    def w(*shape, scale=None, fan_in=None):
        scale = 1 / math.sqrt(fan_in or shape[0]) if scale is None else scale
        return (scale * rng.standard_normal(shape)).astype(np.float32)

    return w


def mlp_params(sizes=(784, 512, 512, 10), seed=0):
    """w1..w3 as (in, out), b1..b3."""
    w = _weights(seed)
    p = {}
    for i, (n, m) in enumerate(zip(sizes, sizes[1:]), 1):
        p[f"w{i}"], p[f"b{i}"] = w(n, m), w(m, scale=0.1)
    return p


def mlp(p):
    def model(x):
        h = np.maximum(x @ p["w1"] + p["b1"], np.float32(0))
        h = np.maximum(h @ p["w2"] + p["b2"], np.float32(0))
        return h @ p["w3"] + p["b3"]

    return model


def cnn_params(seed=0, image=32):
    """conv weights as torch lays them out (out, in, kh, kw), the linear's as (out, in)."""
    w = _weights(seed)
    flat = 64 * (image // 2) ** 2
    return {"c1_w": w(32, 3, 3, 3, fan_in=27), "c1_b": w(32, scale=0.1),
            "c2_w": w(64, 32, 3, 3, fan_in=288), "c2_b": w(64, scale=0.1),
            "fc_w": w(10, flat, fan_in=flat), "fc_b": w(10, scale=0.1)}


def encoder_params(S=128, D=256, H=4, F=1024, seed=0):
    w = _weights(seed)
    p = {n: w(D, D) for n in ("wq", "wk", "wv", "wo")}
    p |= {n: w(D, scale=0.1) for n in ("bq", "bk", "bv", "bo", "be1", "be2")}
    p |= {"w1": w(D, F), "b1": w(F, scale=0.1), "w2": w(F, D), "b2": w(D, scale=0.1)}
    p |= {"g1": 1 + w(D, scale=0.1), "g2": 1 + w(D, scale=0.1)}
    return {"S": S, "D": D, "H": H, "F": F, **p}


def encoder_layer(p, batch=None):
    """On x of shape (S, D), or (batch, S, D) when `batch` is given."""
    S, D, H = p["S"], p["D"], p["H"]
    E = D // H
    scale = np.float32(1 / math.sqrt(E))
    lead = () if batch is None else (batch,)
    nb = len(lead)  # the heads axis goes in front of the sequence axis: (*lead, H, S, E)
    to_heads = (*range(nb), nb + 1, nb, nb + 2)
    k_t = (*range(nb + 1), nb + 2, nb + 1)

    def norm(x, g, b):
        return layernorm(x) * g + b

    def heads(t):
        return t.reshape(*lead, S, H, E).transpose(to_heads)

    def layer(x):
        q, k, v = (heads(x @ p["w" + n] + p["b" + n]) for n in "qkv")
        s = q @ k.transpose(k_t) * scale
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        a = ((e / e.sum(axis=-1, keepdims=True)) @ v).transpose(to_heads).reshape(*lead, S, D)
        x = norm(x + a @ p["wo"] + p["bo"], p["g1"], p["be1"])
        h = np.maximum(x @ p["w1"] + p["b1"], np.float32(0))
        return norm(x + h @ p["w2"] + p["b2"], p["g2"], p["be2"])

    return layer


# -- torch eager ---------------------------------------------------------------------------------


def softmax_torch():
    import torch

    return lambda x: torch.softmax(x, -1)


def layernorm_torch():
    import torch.nn.functional as F

    return lambda x: F.layer_norm(x, (x.shape[-1],), eps=LN_EPS)


def gelu_linear_torch():
    import torch.nn.functional as F

    return lambda x, w, b: F.gelu(x @ w + b, approximate="tanh")


def causal_attention_torch():
    import torch.nn.functional as F

    return lambda q, k, v: F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=True)[0]


def encoder_layer_torch(p):
    """The encoder layer written out in torch ops (what aicc's torch frontend would see)."""
    import torch
    import torch.nn.functional as F

    S, D, H = p["S"], p["D"], p["H"]
    E = D // H
    t = {k: torch.from_numpy(v) for k, v in p.items() if isinstance(v, np.ndarray)}

    def layer(x):
        def heads(y):
            return y.reshape(S, H, E).transpose(0, 1)

        q, k, v = (heads(x @ t["w" + n] + t["b" + n]) for n in "qkv")
        s = q @ k.transpose(1, 2) / math.sqrt(E)
        a = (torch.softmax(s, -1) @ v).transpose(0, 1).reshape(S, D)
        x = F.layer_norm(x + a @ t["wo"] + t["bo"], (D,), t["g1"], t["be1"], LN_EPS)
        h = torch.relu(x @ t["w1"] + t["b1"])
        return F.layer_norm(x + h @ t["w2"] + t["b2"], (D,), t["g2"], t["be2"], LN_EPS)

    return layer


# -- ONNX graphs ---------------------------------------------------------------------------------


def _model(nodes, inputs, inits=()):
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        nodes, "bench",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in inputs],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in inits],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    m.ir_version = 9
    return m


def softmax_onnx(shape):
    from onnx import helper

    return _model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], [("x", shape)])


def layernorm_onnx(shape):
    from onnx import helper

    n = shape[-1]
    return _model([helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1, epsilon=LN_EPS)],
                  [("x", shape)], [("g", np.ones(n, np.float32)), ("b", np.zeros(n, np.float32))])


def gelu_linear_onnx(m, k, n):
    from onnx import helper

    return _model([helper.make_node("MatMul", ["x", "w"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["z"]),
                   helper.make_node("Gelu", ["z"], ["y"], approximate="tanh")],
                  [("x", (m, k)), ("w", (k, n)), ("b", (n,))])


def matmul_onnx(n):
    from onnx import helper

    return _model([helper.make_node("MatMul", ["a", "b"], ["y"])], [("a", (n, n)), ("b", (n, n))])


def causal_attention_onnx(h, L, E):
    from onnx import helper

    mask = np.where(np.tril(np.ones((L, L), bool)), 0, -np.inf).astype(np.float32)
    nodes = [
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["s"]),
        helper.make_node("Mul", ["s", "scale"], ["sc"]),
        helper.make_node("Add", ["sc", "mask"], ["t"]),
        helper.make_node("Softmax", ["t"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["y"]),
    ]
    return _model(nodes, [(n, (h, L, E)) for n in "qkv"],
                  [("scale", np.float32(1 / math.sqrt(E))), ("mask", mask)])


def encoder_layer_onnx(p):
    from onnx import helper

    S, D, H = p["S"], p["D"], p["H"]
    E = D // H
    N = helper.make_node
    nodes, inits = [], [(k, v) for k, v in p.items() if isinstance(v, np.ndarray)]
    inits += [("heads_shape", np.array([S, H, E], np.int64)), ("model_shape", np.array([S, D], np.int64)),
              ("scale", np.float32(1 / math.sqrt(E)))]
    for n in "qkv":
        nodes += [N("MatMul", ["x", "w" + n], [n + "0"]), N("Add", [n + "0", "b" + n], [n + "1"]),
                  N("Reshape", [n + "1", "heads_shape"], [n + "2"]),
                  N("Transpose", [n + "2"], [n], perm=[1, 2, 0] if n == "k" else [1, 0, 2])]
    nodes += [
        N("MatMul", ["q", "k"], ["s"]), N("Mul", ["s", "scale"], ["sc"]), N("Softmax", ["sc"], ["p"], axis=-1),
        N("MatMul", ["p", "v"], ["o"]), N("Transpose", ["o"], ["o1"], perm=[1, 0, 2]),
        N("Reshape", ["o1", "model_shape"], ["a"]),
        N("MatMul", ["a", "wo"], ["a1"]), N("Add", ["a1", "bo"], ["a2"]), N("Add", ["x", "a2"], ["r1"]),
        N("LayerNormalization", ["r1", "g1", "be1"], ["x1"], axis=-1, epsilon=LN_EPS),
        N("MatMul", ["x1", "w1"], ["h0"]), N("Add", ["h0", "b1"], ["h1"]), N("Relu", ["h1"], ["h"]),
        N("MatMul", ["h", "w2"], ["f0"]), N("Add", ["f0", "b2"], ["f1"]), N("Add", ["x1", "f1"], ["r2"]),
        N("LayerNormalization", ["r2", "g2", "be2"], ["y"], axis=-1, epsilon=LN_EPS),
    ]
    return _model(nodes, [("x", (S, D))], inits)
