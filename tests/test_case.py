"""The shared layer test harness: every public layer goes through `run_layer_test`.

One call checks what every Keras layer of the library promises: the config
round-trips, the layer runs eagerly and symbolically with the expected shapes,
a model built on it takes a `fit` step that changes its weights, a `.keras`
save and reload gives equal outputs, mixed precision gives low-precision
outputs over float32 weights with no NaN or inf (masks included), and an XLA
compiled call agrees with the eager one.
"""

import os

import keras
import numpy as np

from keras import ops


def jit_compile(fn):
    """`fn` compiled with XLA by the current backend: `tf.function(jit_compile=True)` or `jax.jit`."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(fn, jit_compile=True)
    if backend == "jax":
        import jax

        return jax.jit(fn)
    raise NotImplementedError(f"no XLA compilation for the {backend!r} backend")


def gradients(loss_fn, inputs, variables, jit=False):
    """Gradients of `loss_fn(*inputs)` with respect to `inputs` then `variables`, on any backend.

    TensorFlow: a `GradientTape` (inside `tf.function(jit_compile=True)` with
    `jit`); JAX: `jax.grad` (under `jax.jit` with `jit`), the variables read
    from a `keras.StatelessScope`. Returns a list of NumPy arrays.
    """
    inputs = [ops.convert_to_tensor(x) for x in inputs]
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        def run(*xs):
            with tf.GradientTape() as tape:
                tape.watch(list(xs))
                loss = loss_fn(*xs)
            return tape.gradient(loss, list(xs) + list(variables))

        run = tf.function(run, jit_compile=True) if jit else run
        return [ops.convert_to_numpy(g) for g in run(*inputs)]
    if backend == "jax":
        import jax

        def loss(xs, values):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                return loss_fn(*xs)

        grad = jax.grad(loss, argnums=(0, 1))
        grad = jax.jit(grad) if jit else grad
        input_grads, variable_grads = grad(inputs, [v.value for v in variables])
        return [np.asarray(g) for g in list(input_grads) + list(variable_grads)]
    raise NotImplementedError(f"no gradients for the {backend!r} backend")


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _floats(outputs):
    return [o for o in _as_tuple(outputs) if "float" in str(o.dtype)]


def _cast_inputs(data, dtype):
    """Float arrays to `dtype`; integer and boolean arrays unchanged."""
    return {
        k: v.astype(dtype) if np.issubdtype(v.dtype, np.floating) else v for k, v in data.items()
    }


def run_layer_test(
    layer_cls,
    init_kwargs,
    input_data,
    expected_output_shape,
    call_kwargs=None,
    tmp_path=None,
    expect_trainable_weights=True,
    run_mixed_precision=True,
    run_jit=True,
    atol=1e-5,
):
    """Run every generic layer check on `layer_cls(**init_kwargs)`.

    Args:
        layer_cls: the layer class.
        init_kwargs: dict of constructor arguments.
        input_data: dict of call argument name -> NumPy array (the batch axis
            first). Every entry becomes a `keras.Input` of the test model, so
            masks may be passed here too.
        expected_output_shape: a shape, or a tuple of shapes for layers that
            return several tensors, with the concrete batch size.
        call_kwargs: dict of non-tensor call arguments.
        tmp_path: folder for the `.keras` file.
        expect_trainable_weights: whether a fit step must change weights.
        run_mixed_precision, run_jit: switch parts off for a layer that cannot
            support them (none of ours should).
        atol: tolerance for reload and XLA comparisons.
    """
    call_kwargs = dict(call_kwargs or {})
    expected = (
        expected_output_shape
        if isinstance(expected_output_shape[0], (tuple, list))
        else (expected_output_shape,)
    )
    expected = tuple(tuple(s) for s in expected)

    # 1. Config round-trip.
    layer = layer_cls(**init_kwargs)
    config = layer.get_config()
    for key, value in init_kwargs.items():
        if key in ("dtype", "name"):
            continue
        assert key in config, f"{layer_cls.__name__}.get_config() misses {key!r}"
    clone = layer_cls.from_config(config)
    assert clone.get_config() == config

    # 2. Eager call.
    outputs = _as_tuple(layer(**input_data, **call_kwargs))
    assert tuple(tuple(o.shape) for o in outputs) == expected, (
        f"eager output shapes {[tuple(o.shape) for o in outputs]} != {expected}"
    )

    # 3. Symbolic call in a functional model.
    inputs = {
        name: keras.Input(shape=arr.shape[1:], dtype=str(arr.dtype), name=name)
        for name, arr in input_data.items()
    }
    symbolic_layer = layer_cls(**init_kwargs)
    symbolic = _as_tuple(symbolic_layer(**inputs, **call_kwargs))
    assert tuple(tuple(o.shape)[1:] for o in symbolic) == tuple(s[1:] for s in expected)
    model = keras.Model(inputs, symbolic[0])

    # 4. One fit step changes the weights and gives a finite loss.
    if expect_trainable_weights:
        assert symbolic_layer.trainable_weights, "the layer has no trainable weights"
        before = [w.numpy().copy() for w in symbolic_layer.trainable_weights]
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
        target = np.random.default_rng(0).normal(size=expected[0]).astype("float32")
        history = model.fit(input_data, target, batch_size=expected[0][0], epochs=1, verbose=0)
        assert np.isfinite(history.history["loss"][0])
        after = [w.numpy() for w in symbolic_layer.trainable_weights]
        assert any(not np.allclose(b, a) for b, a in zip(before, after)), "fit changed nothing"

    # 5. .keras save and reload gives equal outputs.
    if tmp_path is not None:
        path = os.path.join(str(tmp_path), f"{layer_cls.__name__}.keras")
        model.save(path)
        reloaded = keras.models.load_model(path)
        np.testing.assert_allclose(
            ops.convert_to_numpy(reloaded(input_data)),
            ops.convert_to_numpy(model(input_data)),
            atol=atol,
        )

    # 6. Mixed precision: low-precision outputs, float32 weights, all finite.
    if run_mixed_precision:
        for policy, compute in (("mixed_float16", "float16"), ("mixed_bfloat16", "bfloat16")):
            mixed = layer_cls(**init_kwargs, dtype=policy)
            out = _as_tuple(mixed(**input_data, **call_kwargs))
            for w in mixed.weights:
                if "float" in str(w.dtype):
                    assert w.dtype == "float32", f"{policy}: weight {w.path} is {w.dtype}"
            for o in _floats(out):
                assert keras.backend.standardize_dtype(o.dtype) == compute, (
                    f"{policy}: output dtype {o.dtype}"
                )
                values = ops.convert_to_numpy(ops.cast(o, "float32"))
                assert np.all(np.isfinite(values)), f"{policy}: NaN or inf in outputs"

    # 7. XLA: a jit-compiled call agrees with the eager call.
    if run_jit:
        eager = _floats(layer(**input_data, **call_kwargs))
        tensors = {k: ops.convert_to_tensor(v) for k, v in input_data.items()}
        compiled = jit_compile(lambda kw: layer(**kw, **call_kwargs))
        for e, c in zip(eager, _floats(compiled(tensors))):
            np.testing.assert_allclose(
                ops.convert_to_numpy(c), ops.convert_to_numpy(e), atol=max(atol, 1e-5), rtol=1e-5
            )
    return layer
