"""The models' optimizer variables made at `compile`, before the first training step is traced."""


class BuildsOptimizerAtCompile:
    """Mixin for a `keras.Model`: `compile` builds the optimizer when the model is built.

    Keras' TensorFlow trainer, without a distribution strategy, leaves the
    optimizer's variables (Adam's moments, one pair a weight) to be made while
    it traces the first training step. TensorFlow then wraps each new variable
    in a conditional and traces the whole step a second time: the first epoch
    starts seconds later (twice as late for a small Transformer). Made here,
    in the scope `compile` runs in (a strategy's, when there is one), they are
    the variables Keras would make; training is unchanged. A model built after
    `compile` is left to Keras.
    """

    def compile(self, *args, **kwargs):
        super().compile(*args, **kwargs)
        if self.built and self.optimizer is not None and not self.optimizer.built:
            self.optimizer.build(self.trainable_variables)
