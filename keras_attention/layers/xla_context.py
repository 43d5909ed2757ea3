"""Whether the code being traced will be compiled by XLA.

The layers that run a different (faster) formulation under XLA, the dropout
and the projections' kernel gradient, ask this at trace time.
"""

import tensorflow as tf

try:  # how TensorFlow's own ops tell that they are being traced for XLA
    from tensorflow.python.ops.control_flow_util import GraphOrParentsInXlaContext
except ImportError:  # pragma: no cover - a TensorFlow without it: never XLA-specific code
    GraphOrParentsInXlaContext = None


def in_xla_compilation():
    """True while a function compiled with XLA (`jit_compile=True`) is traced."""
    if GraphOrParentsInXlaContext is None or tf.executing_eagerly():
        return False
    return GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())
