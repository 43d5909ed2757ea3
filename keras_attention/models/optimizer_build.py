"""The models' optimizer variables made before the first training step is traced."""

import contextlib

import keras


def build_optimizer(model):
    """Build `model.optimizer` for the model's trainable weights, in its strategy's scope, unless it is built."""
    optimizer = model.optimizer
    if optimizer is None or optimizer.built:
        return
    tensorflow = keras.backend.backend() == "tensorflow"
    with model.distribute_strategy.scope() if tensorflow else contextlib.nullcontext():
        optimizer.build(model.trainable_variables)


class BuildsOptimizerBeforeTracing:
    """Mixin for a `keras.Model`: the optimizer is built when the training function is made.

    Keras' TensorFlow trainer, without a distribution strategy, leaves the
    optimizer's variables (Adam's moments, one pair a weight) to be made while
    it traces the first training step. TensorFlow then wraps each new variable
    in a conditional and traces the whole step a second time: the first epoch
    starts seconds later (twice as late for a small Transformer). Made here,
    just before the trace, in the model's strategy scope, they are the
    variables Keras would make; training is unchanged. A model not yet built
    is left to Keras; `compile` and `.keras` loading are Keras' own.
    """

    def make_train_function(self, force=False):
        if self.built:
            build_optimizer(self)
        return super().make_train_function(force)
