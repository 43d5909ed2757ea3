"""A scan over time that XLA can differentiate on the TensorFlow backend."""

import keras
from keras import ops


def scan_carry(step, init, xs):
    """Run `carry = step(carry, x)` over the leading axis of `xs`; stack every carry.

    Returns the structure of `init` with a new leading time axis. On the
    TensorFlow backend this is `tf.scan`, whose loop has a known trip count
    (`keras.ops.scan`'s does not, and XLA then cannot compile its gradient);
    elsewhere it is `keras.ops.scan`.
    """
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        return tf.scan(step, xs, initializer=init)

    def body(carry, x):
        carry = step(carry, x)
        return carry, carry

    return ops.scan(body, init, xs)[1]
