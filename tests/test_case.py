"""The shared layer test harness: every public layer goes through `run_layer_test`.

One call checks what every Keras layer of the library promises, in the manner
of Keras' own `run_layer_test`: the config round-trips; the layer runs eagerly
and in a functional model with every output it was asked for (weights,
caches), the symbolic outputs having the eager shapes and dtypes; a model built
on it takes a `fit` step that changes its weights; a `.keras` save reloads with
equal outputs here and (on TensorFlow) in a fresh process that imported
`keras_attention` alone; mixed precision gives low-precision outputs over float32 weights with no
NaN or inf (masks included); and an XLA compiled call agrees with the eager one.
"""

import atexit
import os
import subprocess
import sys
import tempfile

import keras
import numpy as np

from keras import ops


def fewer_under_jax(values, kept):
    """`values` for `parametrize`, under JAX only those in `kept`. For variants that run the same
    backend ops in another order or with other settings (pre- or post-norm blocks, a layer's options in the
    harness): the JAX pass checks what can differ there, the ops, once each; the TensorFlow pass takes them all."""
    values = list(values)
    return values if keras.backend.backend() != "jax" else [v for v in values if v in kept]


def one_shape_under_jax(varied, fixed):
    """`varied`, or under JAX `fixed`: a property test's sizes (or the strategies that draw them). Under JAX each op
    compiles anew for every shape it meets, so a property's cases there share one shape, and their compiled ops;
    the TensorFlow pass varies it."""
    return fixed if keras.backend.backend() == "jax" else varied


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


def _flat(outputs):
    return keras.tree.flatten(outputs)


def _floats(outputs):
    return [o for o in _flat(outputs) if "float" in str(o.dtype)]


def _cast_inputs(data, dtype):
    """Float arrays to `dtype` tensors; integer and boolean arrays unchanged (pairs, such as caches, too)."""
    def cast(v):
        return ops.cast(v, dtype) if np.issubdtype(v.dtype, np.floating) else v

    return {k: tuple(map(cast, v)) if isinstance(v, tuple) else cast(v) for k, v in data.items()}


def _flat_inputs(data):
    """`{name: array or (array, ...)}` -> `{name or name_i: array}`, the test model's named inputs."""
    flat = {}
    for name, value in data.items():
        if isinstance(value, tuple):
            flat.update({f"{name}_{i}": v for i, v in enumerate(value)})
        else:
            flat[name] = value
    return flat


def _nest_inputs(data, flat):
    """The inverse of `_flat_inputs` for the tensors `flat`, in `data`'s structure."""
    return {
        name: tuple(flat[f"{name}_{i}"] for i in range(len(value))) if isinstance(value, tuple) else flat[name]
        for name, value in data.items()
    }


# Loads `.keras` files in a process that imported `keras_attention` and nothing else
# of ours, as a user's script does: one process per test worker, fed folder names.
_FRESH_LOADER = """
import sys
import keras_attention  # alone: the classes must be found without importing `layers`
for line in sys.stdin:
    folder, atol = line.split()
    try:
        import keras, numpy as np
        model = keras.models.load_model(folder + "/model.keras")
        inputs = dict(np.load(folder + "/inputs.npz"))
        expected = np.load(folder + "/outputs.npz")
        outputs = keras.tree.flatten(model(inputs))
        assert len(outputs) == len(expected.files), (len(outputs), expected.files)
        for i, output in enumerate(outputs):
            np.testing.assert_allclose(keras.ops.convert_to_numpy(output), expected[f"o{i}"], atol=float(atol))
        print("ok", flush=True)
    except Exception as error:
        print(type(error).__name__ + ": " + " ".join(str(error).split())[:3000], flush=True)
"""
_fresh = {}


def load_in_fresh_process(folder, atol):
    """Load `folder/model.keras` in the fresh process and compare its outputs; raise AssertionError if not equal."""
    process = _fresh.get("process")
    if process is None or process.poll() is not None:
        _fresh["stderr"] = tempfile.TemporaryFile(mode="w+")
        process = _fresh["process"] = subprocess.Popen(
            [sys.executable, "-c", _FRESH_LOADER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=_fresh["stderr"], text=True, cwd=tempfile.gettempdir(),
        )
        atexit.register(process.kill)
    process.stdin.write(f"{folder} {atol}\n")
    process.stdin.flush()
    answer = process.stdout.readline().strip()
    if not answer:
        _fresh["stderr"].seek(0)
        raise AssertionError("the fresh process died: " + _fresh["stderr"].read()[-3000:])
    assert answer == "ok", f"in a fresh process after `import keras_attention`: {answer}"


def _save_for_a_fresh_process(model, flat_data, outputs, folder):
    os.makedirs(folder, exist_ok=True)
    model.save(os.path.join(folder, "model.keras"))
    np.savez(os.path.join(folder, "inputs.npz"), **flat_data)
    np.savez(os.path.join(folder, "outputs.npz"),
             **{f"o{i}": ops.convert_to_numpy(o) for i, o in enumerate(_flat(outputs))})


def run_layer_test(
    layer_cls,
    init_kwargs,
    input_data,
    expected_output_shape,
    call_kwargs=None,
    tmp_path=None,
    expect_trainable_weights=True,
    run_fit=True,
    run_mixed_precision=True,
    run_jit=True,
    atol=1e-5,
):
    """Run every generic layer check on `layer_cls(**init_kwargs)`.

    Args:
        layer_cls: the layer class.
        init_kwargs: dict of constructor arguments.
        input_data: dict of call argument name -> NumPy array (the batch axis
            first), or a tuple of arrays (a cache). Every array becomes a
            `keras.Input` of the test model, so masks may be passed here too.
        expected_output_shape: a shape, or a tuple of shapes for layers that
            return several tensors (a cache pair's two shapes in order), with
            the concrete batch size.
        call_kwargs: dict of non-tensor call arguments.
        tmp_path: folder for the `.keras` files; without it nothing is saved.
        expect_trainable_weights: whether a fit step must change weights.
        run_fit: False for a call that writes a cache: TensorFlow cannot
            differentiate its in-place write (decoding never trains).
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
    eager = _flat(layer(**input_data, **call_kwargs))
    assert tuple(tuple(o.shape) for o in eager) == expected, (
        f"eager output shapes {[tuple(o.shape) for o in eager]} != {expected}"
    )

    # 3. Symbolic call in a functional model, every output kept: the symbolic
    # outputs (`compute_output_spec`) have the eager shapes and dtypes.
    flat_data = _flat_inputs(input_data)
    inputs = {
        name: keras.Input(shape=arr.shape[1:], dtype=str(arr.dtype), name=name)
        for name, arr in flat_data.items()
    }
    symbolic_layer = layer_cls(**init_kwargs)
    symbolic = _flat(symbolic_layer(**_nest_inputs(input_data, inputs), **call_kwargs))
    assert [tuple(o.shape)[1:] for o in symbolic] == [s[1:] for s in expected], (
        f"symbolic shapes {[tuple(o.shape) for o in symbolic]} != eager {expected}"
    )
    assert [keras.backend.standardize_dtype(o.dtype) for o in symbolic] == [
        keras.backend.standardize_dtype(o.dtype) for o in eager
    ], "symbolic dtypes differ from the eager ones"
    model = keras.Model(inputs, symbolic)

    # 4. One fit step changes the weights and gives a finite loss.
    if expect_trainable_weights and run_fit:
        assert symbolic_layer.trainable_weights, "the layer has no trainable weights"
        before = [w.numpy().copy() for w in symbolic_layer.trainable_weights]
        first = keras.Model(inputs, symbolic[0])
        first.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
        target = np.random.default_rng(0).normal(size=expected[0]).astype("float32")
        history = first.fit(flat_data, target, batch_size=expected[0][0], epochs=1, verbose=0)
        assert np.isfinite(history.history["loss"][0])
        after = [w.numpy() for w in symbolic_layer.trainable_weights]
        assert any(not np.allclose(b, a) for b, a in zip(before, after)), "fit changed nothing"

    # 5. .keras save and reload gives equal outputs, here and in a fresh process.
    if tmp_path is not None:
        outputs = model(flat_data)
        folder = os.path.join(str(tmp_path), f"{layer_cls.__name__}_saved")
        _save_for_a_fresh_process(model, flat_data, outputs, folder)
        reloaded = keras.models.load_model(os.path.join(folder, "model.keras"))
        for got, want in zip(_flat(reloaded(flat_data)), _flat(outputs)):
            np.testing.assert_allclose(ops.convert_to_numpy(got), ops.convert_to_numpy(want), atol=atol)
        if keras.backend.backend() == "tensorflow":  # finding the classes does not depend on the backend
            load_in_fresh_process(folder, atol)  # (tests/test_public_api.py loads a file under JAX so)

    # 6. Mixed precision: low-precision outputs, float32 weights, all finite. Under JAX, where every op compiles
    # for each new dtype, float16 only: the narrower range, where an overflow would show (the dtype logic is Keras').
    if run_mixed_precision:
        policies = (("mixed_float16", "float16"), ("mixed_bfloat16", "bfloat16"))
        for policy, compute in policies[:1] if keras.backend.backend() == "jax" else policies:
            mixed = layer_cls(**init_kwargs, dtype=policy)
            out = mixed(**_cast_inputs(input_data, compute), **call_kwargs)
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
        tensors = {k: ops.convert_to_tensor(v) for k, v in flat_data.items()}
        compiled = jit_compile(lambda kw: layer(**_nest_inputs(input_data, kw), **call_kwargs))
        for e, c in zip(eager, _floats(compiled(tensors))):
            np.testing.assert_allclose(
                ops.convert_to_numpy(c), ops.convert_to_numpy(e), atol=max(atol, 1e-5), rtol=1e-5
            )
    return layer
