"""`xla_context.in_xla_compilation`: true only while an XLA-compiled function is traced."""

import tensorflow as tf

from keras_attention.layers.xla_context import in_xla_compilation


def test_in_xla_compilation_only_inside_jit_compiled_functions():
    seen = {}

    def probe(name):
        def fn(x):
            seen[name] = in_xla_compilation()
            return x
        return fn

    tf.function(probe("xla"), jit_compile=True)(tf.ones(()))
    tf.function(probe("graph"))(tf.ones(()))
    probe("eager")(tf.ones(()))
    assert seen == {"xla": True, "graph": False, "eager": False}
