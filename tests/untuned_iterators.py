"""Every tf.data iterator of the process runs without tf.data's autotuning (test processes only).

Deleting an autotuned iterator waits for its tuning thread's next round, up to a minute later (TensorFlow
2.21; `docs/training.md`, "From Python"). The garbage collector deletes old iterators at random moments, and
each wait stalls whatever test runs then. No test measures tf.data's tuning; outputs are the same.
"""


def iterators_without_autotuning():
    """Make every `tf.data` iterator created from now on in this process untuned."""
    import tensorflow as tf
    from tensorflow.python.data.ops import iterator_ops

    create, untuned = iterator_ops.OwnedIterator._create_iterator, tf.data.Options()
    untuned.autotune.enabled = False
    iterator_ops.OwnedIterator._create_iterator = lambda self, dataset: create(self, dataset.with_options(untuned))
