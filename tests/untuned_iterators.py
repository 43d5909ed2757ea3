"""Every tf.data iterator of the process runs without tf.data's autotuning and its default graph rewrites (test
processes only).

Deleting an autotuned iterator waits for its tuning thread's next round, up to a minute later (TensorFlow
2.21; `docs/training.md`, "From Python"). The garbage collector deletes old iterators at random moments, and
each wait stalls whatever test runs then. The default rewrites (map fusion, parallel batching, injected
prefetches) are applied when each iterator is made: the tests make many short-lived iterators, and the
rewrites cost them more than they save (about 8% of the data and corpus tests' time). No test measures
tf.data's tuning or its rewrites; outputs are the same.
"""


def untune_iterators():
    """Make every `tf.data` iterator created from now on in this process untuned and unrewritten."""
    import tensorflow as tf
    from tensorflow.python.data.ops import iterator_ops

    create, untuned = iterator_ops.OwnedIterator._create_iterator, tf.data.Options()
    untuned.autotune.enabled = False
    untuned.experimental_optimization.apply_default_optimizations = False
    iterator_ops.OwnedIterator._create_iterator = lambda self, dataset: create(self, dataset.with_options(untuned))
