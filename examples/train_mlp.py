"""Train an MLP classifier on scikit-learn's digits with SGD through `compiler.value_and_grad`.

    python examples/train_mlp.py [--epochs 15] [--batch 32] [--lr 0.1]

The loss (softmax cross-entropy) and its gradients with respect to the four parameters are
one compiled module; the update is plain NumPy. Prints loss and test accuracy per epoch.
"""

from __future__ import annotations

import argparse

import numpy as np

import compiler

HIDDEN, CLASSES = 64, 10


def loss(x, y, w1, b1, w2, b2):
    """Mean softmax cross-entropy of the MLP's logits against one-hot labels `y`."""
    z = logits(x, w1, b1, w2, b2)
    z = z - np.max(z, axis=1, keepdims=True)
    log_p = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    return -np.mean(np.sum(y * log_p, axis=1))


def logits(x, w1, b1, w2, b2):
    return np.maximum(x @ w1 + b1, 0.0) @ w2 + b2


def load_digits(seed: int = 0):
    """Digits scaled to [0, 1], split 80/20 at random: (x_train, y_train, x_test, labels_test)."""
    from sklearn.datasets import load_digits as _load

    data = _load()
    x = (data.data / 16.0).astype(np.float32)
    labels = data.target
    order = np.random.default_rng(seed).permutation(len(x))
    split = int(0.8 * len(x))
    tr, te = order[:split], order[split:]
    y = np.eye(CLASSES, dtype=np.float32)[labels]
    return x[tr], y[tr], x[te], labels[te]


def init_params(n_in: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    w1 = (rng.standard_normal((n_in, HIDDEN)) * np.sqrt(2.0 / n_in)).astype(np.float32)
    w2 = (rng.standard_normal((HIDDEN, CLASSES)) * np.sqrt(1.0 / HIDDEN)).astype(np.float32)
    return [w1, np.zeros(HIDDEN, np.float32), w2, np.zeros(CLASSES, np.float32)]


def train(epochs: int = 15, batch: int = 32, lr: float = 0.1, seed: int = 0, log=print):
    """SGD over shuffled minibatches (the last partial batch of an epoch is dropped, so one
    compiled step serves every batch); returns (loss per epoch, test accuracy per epoch)."""
    x_tr, y_tr, x_te, labels_te = load_digits(seed)
    params = init_params(x_tr.shape[1], seed)
    step = compiler.value_and_grad(loss, argnums=(2, 3, 4, 5))
    predict = compiler.jit(logits)
    rng = np.random.default_rng(seed + 1)
    losses, accuracies = [], []
    for epoch in range(epochs):
        order = rng.permutation(len(x_tr))
        total, n = 0.0, 0
        for i in range(0, len(order) - batch + 1, batch):
            idx = order[i:i + batch]
            value, grads = step(x_tr[idx], y_tr[idx], *params)
            params = [p - lr * g for p, g in zip(params, grads)]
            total, n = total + float(value), n + 1
        acc = float(np.mean(np.argmax(predict(x_te, *params), axis=1) == labels_te))
        losses.append(total / n)
        accuracies.append(acc)
        log(f"epoch {epoch + 1:2d}  loss {total / n:.4f}  test accuracy {100 * acc:.1f}%")
    return losses, accuracies


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.1)
    args = ap.parse_args()
    train(args.epochs, args.batch, args.lr)


if __name__ == "__main__":
    main()
