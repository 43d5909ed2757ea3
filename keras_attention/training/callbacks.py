"""Keras callbacks for translation training."""

import keras

from keras_attention.training.evaluation import evaluate_bleu


class BleuCallback(keras.callbacks.Callback):
    """Decode a validation sample every `frequency` epochs and log BLEU and chrF.

    Adds `val_bleu`, `val_bleu_lowercase` and `val_chrf` to the epoch logs, so
    they appear in the progress bar's history, in `History`, in CSV/TensorBoard
    loggers, and can drive `ModelCheckpoint(monitor="val_bleu", mode="max")`.

    Args:
        translator: a `Translator` around the model being trained.
        pairs: list of `(source, target)` strings (keep it small: a few
            hundred sentences).
        frequency: int. Epochs between evaluations. Defaults to 1.
        method: decoding method. Defaults to "greedy".
        verbose: bool. Print the scores and one example. Defaults to True.
    """

    def __init__(self, translator, pairs, frequency=1, method="greedy", verbose=True):
        super().__init__()
        self.translator = translator
        self.pairs = list(pairs)
        self.frequency = frequency
        self.method = method
        self.verbose = verbose

    def on_epoch_end(self, epoch, logs=None):
        if logs is None or (epoch + 1) % self.frequency:
            return
        scores = evaluate_bleu(self.translator, self.pairs, method=self.method)
        logs["val_bleu"] = scores["bleu"]
        logs["val_bleu_lowercase"] = scores["bleu_lowercase"]
        logs["val_chrf"] = scores["chrf"]
        if self.verbose:
            print(
                f"\nepoch {epoch + 1}: BLEU {scores['bleu']:.2f} (lower-cased "
                f"{scores['bleu_lowercase']:.2f}), chrF {scores['chrf']:.2f} on {len(self.pairs)} "
                f"sentences\n  source:    {self.pairs[0][0]}\n  reference: {self.pairs[0][1]}\n"
                f"  output:    {scores['hypotheses'][0]}"
            )
