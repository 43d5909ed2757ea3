"""Initializers for the models' attention kernels."""

import keras


def headwise_glorot_uniform(seed=None):
    """Glorot-uniform attention kernels with fans counted over the per-head kernel's axes.

    An attention projection's kernel is `(d, N, H)` (query, key, value) or
    `(N, H, d)` (output). Glorot's limit sqrt(6 / (fan_in + fan_out)) is taken
    here with fan_in = the product of the first two axes and fan_out = the
    first and last (for query, key and value: N*d and H*d; for the output:
    N*H and N*d), as Keras counted a 3-D kernel's fans before `EinsumDense`
    passed it the layer's true input and output axes. With d=256 and 4 heads,
    the query, key and value kernels start at a standard deviation of 0.011
    and the output at 0.040, against 0.0625 for both with the true fans: the
    attention starts near uniform and each attention branch small next to
    its residual path. keras-attention 0.2's Transformer results were trained
    from it, and on Multi30k it learns faster than the true-fan Glorot
    (`scripts/ablations/ablate_attention_init.py`, `benchmarks/attention_init.json`).

    Keras' `MultiHeadAttention` makes each projection's initializer from
    this one's config, seed included: with a fixed `seed`, the query, key
    and value kernels start equal. Leave `seed=None` for a model, and fix the
    seed with `keras.utils.set_random_seed` instead.

    Example:

    >>> init = headwise_glorot_uniform(seed=0)
    >>> round(float(keras.ops.std(init((256, 4, 64)))), 3)
    0.011
    """
    return keras.initializers.VarianceScaling(
        1.0, mode="fan_avg", distribution="uniform", seed=seed, input_axes=[0, 1], output_axes=[0, 2]
    )
