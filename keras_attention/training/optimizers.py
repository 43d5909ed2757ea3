"""Optimizers whose gradient clipping sees the whole global batch under `tf.distribute`.

Keras optimizers clip gradients (`clipnorm`, `global_clipnorm`, `clipvalue`)
inside `apply`, before they add up the replicas' gradients. Under a
distribution strategy each replica therefore clips only its own share of the
gradient, and N replicas do not train like one device with the same global
batch. The optimizers here clip the sum instead.

They also clip sparse gradients (`tf.IndexedSlices`, which an embedding
lookup gives) by the norm of the dense gradient. Keras measures the norm of
the slices as they are, and when a token occurs several times in a batch its
slices are not yet added up, so that norm is wrong (for two equal slices of
one row, too large by sqrt(2), and the clipped row sqrt(2) times too long).
"""

import keras


class ClipAfterAllReduce:
    """Mixin for a Keras optimizer: clip the replicas' summed gradients.

    With one replica (or no clipping) nothing changes. With N replicas, each
    replica sums the gradients of all replicas (an all-reduce), clips that
    sum exactly as one device would, and hands on 1/N of it; the optimizer's
    own all-reduce then adds the N shares back into the clipped sum. The cost
    is one more all-reduce of the gradients per step, paid only when clipping
    is on and there are several replicas. Sparse gradients are made dense
    before clipping, on one device too.
    """

    def _clip_gradients(self, grads):
        if not (self.clipnorm or self.global_clipnorm or self.clipvalue):
            return grads
        if keras.backend.backend() != "tensorflow":
            return super()._clip_gradients(grads)
        import tensorflow as tf

        grads = [tf.convert_to_tensor(g) for g in grads]  # IndexedSlices -> dense (summed rows)
        context = tf.distribute.get_replica_context()
        if context is None or context.num_replicas_in_sync == 1:
            return super()._clip_gradients(grads)
        replicas = context.num_replicas_in_sync
        summed = context.all_reduce(tf.distribute.ReduceOp.SUM, grads)
        return [g / replicas for g in super()._clip_gradients(summed)]


@keras.saving.register_keras_serializable(package="keras_attention")
class Adam(ClipAfterAllReduce, keras.optimizers.Adam):
    """`keras.optimizers.Adam` whose clipping acts on the global-batch gradient.

    Same arguments as `keras.optimizers.Adam`; see `ClipAfterAllReduce`.

    Example:

    >>> optimizer = Adam(1e-3, clipnorm=1.0)
    >>> optimizer.get_config()["clipnorm"]
    1.0
    """


@keras.saving.register_keras_serializable(package="keras_attention")
class SGD(ClipAfterAllReduce, keras.optimizers.SGD):
    """`keras.optimizers.SGD` whose clipping acts on the global-batch gradient.

    Same arguments as `keras.optimizers.SGD`; see `ClipAfterAllReduce`.
    """
