"""The decomposable attention model for sentence pairs (Parikh et al., 2016)."""

import keras
from keras import ops

from keras_attention.base.validation import check_positive_int, check_rate
from keras_attention.layers.attention_ops import combine_masks, masked_softmax
from keras_attention.models.optimizer_build import BuildsOptimizerBeforeTracing

# Signed distances i - j beyond this share one bias (section 3.4 of the paper).
MAX_DISTANCE = 10


def _feedforward(name, units, num_layers, dropout):
    """`num_layers` x (Dropout, Dense(units, relu)), applied to the last axis."""
    stack = []
    for i in range(num_layers):
        stack.append(keras.layers.Dropout(dropout, name=f"{name}_dropout_{i}"))
        stack.append(keras.layers.Dense(units, activation="relu", name=f"{name}_dense_{i}"))
    return keras.Sequential(stack, name=name)


@keras.saving.register_keras_serializable(package="keras_attention")
class DecomposableAttention(BuildsOptimizerBeforeTracing, keras.Model):
    """Attend, compare, aggregate: a sentence-pair classifier without RNNs.

    The model of "A Decomposable Attention Model for Natural Language
    Inference" (Parikh, Täckström, Das and Uszkoreit, 2016,
    https://arxiv.org/abs/1606.01933). Both sentences are embedded and
    projected to `hidden_dim`; then
    1. attend: e_ij = F(a_i)^T F(b_j); beta_i = sum_j softmax_j(e_ij) b_j is the
       part of the hypothesis softly aligned to premise word a_i, and
       alpha_j = sum_i softmax_i(e_ij) a_i the part of the premise aligned to b_j;
    2. compare: v1_i = G([a_i; beta_i]) and v2_j = G([b_j; alpha_j]), with one G;
    3. aggregate: v1 = sum_i v1_i, v2 = sum_j v2_j, logits = H([v1; v2]).
    F, G and H are feed-forward networks with ReLU (H ends with a linear layer
    to `num_classes`) and dropout on the input of every dense layer.

    Without intra-attention the model sees each sentence as a bag of words: it
    is invariant to the order of the words. `intra_attention=True` adds the
    paper's optional step (section 3.4): each sentence first attends to itself,
    a'_i = sum_j softmax_j(F_intra(a_i)^T F_intra(a_j) + d_{i-j}) a_j, with one
    learned bias d per signed distance, distances beyond +-10 sharing the bias
    of +-10; the word representation becomes [a_i; a'_i].

    Masking: with `mask_zero=True`, id 0 is padding. Padded words get zero
    attention weight and are left out of the sums, so extra padding does not
    change the logits.

    Args:
        vocab_size: int. Size of the (shared) vocabulary, padding id included.
        num_classes: int, at least 2. Number of output classes.
        embedding_dim: int. Size of the word embeddings (300 for the paper's
            GloVe vectors). Defaults to 128.
        hidden_dim: int. Width of the projection and of F, G and H (the paper's
            200). Defaults to 200.
        dropout: float in [0, 1). Dropout before every dense layer of F, G and
            H. Defaults to 0.2.
        intra_attention: bool. Add intra-sentence attention. Defaults to False.
        mask_zero: bool. Treat id 0 as padding. Defaults to True.
        embeddings_initializer: initializer of the word vectors. Defaults to
            Keras' `"uniform"` (within +-0.05). With embeddings that small
            every alignment score starts near zero and the alignments stay
            close to uniform for a long time; `keras.initializers.RandomNormal(
            stddev=1.0)` gives peaked alignments from the start (tutorial 04
            compares the two).
        **kwargs: standard model arguments (`name`, ...).

    Call arguments:
        inputs: a pair `(premise_ids, hypothesis_ids)` of int tensors
            `(B, L_a)` and `(B, L_b)`.
        training: bool. Whether dropout is active.

    Returns:
        Logits `(B, num_classes)`.

    Example:

    >>> model = DecomposableAttention(vocab_size=100, num_classes=3)
    >>> premise = keras.ops.array([[5, 8, 2, 0], [7, 3, 9, 4]])
    >>> hypothesis = keras.ops.array([[5, 6, 0], [1, 2, 3]])
    >>> tuple(model((premise, hypothesis)).shape)
    (2, 3)
    >>> to_b, to_a = model.alignments((premise, hypothesis))
    >>> tuple(to_b.shape), tuple(to_a.shape)
    ((2, 4, 3), (2, 4, 3))

    References:
        - Parikh et al., 2016. https://arxiv.org/abs/1606.01933
    """

    def __init__(
        self,
        vocab_size,
        num_classes,
        embedding_dim=128,
        hidden_dim=200,
        dropout=0.2,
        intra_attention=False,
        mask_zero=True,
        embeddings_initializer="uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocab_size = check_positive_int("vocab_size", vocab_size)
        self.num_classes = check_positive_int("num_classes", num_classes)
        if num_classes < 2:
            raise ValueError(
                f"`num_classes` must be at least 2. Received: num_classes={num_classes!r}"
            )
        self.embedding_dim = check_positive_int("embedding_dim", embedding_dim)
        self.hidden_dim = check_positive_int("hidden_dim", hidden_dim)
        self.dropout = check_rate("dropout", dropout)
        self.intra_attention = bool(intra_attention)
        self.mask_zero = bool(mask_zero)

        # Word ids (B, L) -> (B, L, embedding_dim) -> (B, L, hidden_dim); the
        # linear projection is the paper's, it lets fixed pretrained vectors in.
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        self.embedding = keras.layers.Embedding(
            vocab_size, embedding_dim, embeddings_initializer=self.embeddings_initializer, name="embedding"
        )
        self.projection = keras.layers.Dense(hidden_dim, use_bias=False, name="projection")
        if self.intra_attention:
            # F_intra: (B, L, hidden_dim) -> (B, L, hidden_dim).
            self.intra_feedforward = _feedforward("intra_feedforward", hidden_dim, 2, dropout)
        # F: (B, L, d) -> (B, L, hidden_dim), d = hidden_dim (2 * hidden_dim with intra).
        self.attend_feedforward = _feedforward("attend_feedforward", hidden_dim, 2, dropout)
        # G: (B, L, 2d) -> (B, L, hidden_dim).
        self.compare_feedforward = _feedforward("compare_feedforward", hidden_dim, 2, dropout)
        # H: (B, 2 * hidden_dim) -> (B, hidden_dim), then a linear layer to (B, num_classes).
        self.aggregate_feedforward = _feedforward("aggregate_feedforward", hidden_dim, 2, dropout)
        self.classifier = keras.layers.Dense(num_classes, name="classifier")

    def build(self, input_shape=None):
        h = self.hidden_dim
        d = 2 * h if self.intra_attention else h
        self.embedding.build((None, None))
        self.projection.build((None, None, self.embedding_dim))
        if self.intra_attention:
            self.intra_feedforward.build((None, None, h))
            # d_{i-j} for i - j in [-10, 10]; zeros make the start order-blind.
            self.distance_bias = self.add_weight(
                name="distance_bias", shape=(2 * MAX_DISTANCE + 1,), initializer="zeros"
            )
        self.attend_feedforward.build((None, None, d))
        self.compare_feedforward.build((None, None, 2 * d))
        self.aggregate_feedforward.build((None, 2 * h))
        self.classifier.build((None, h))
        self.built = True

    # The three steps ---------------------------------------------------------

    def _embed(self, ids, training=None):
        """Ids (B, L) -> word vectors (B, L, d) and padding mask (B, L) or None."""
        mask = ops.not_equal(ids, 0) if self.mask_zero else None
        x = self.projection(self.embedding(ids))  # (B, L, hidden_dim)
        if self.intra_attention:
            x = ops.concatenate([x, self._intra_attend(x, mask, training)], axis=-1)
        return x, mask  # (B, L, d)

    def _intra_attend(self, x, mask, training=None):
        """a'_i = sum_j softmax_j(F_intra(a_i) . F_intra(a_j) + d_{i-j}) a_j."""
        f = self.intra_feedforward(x, training=training)  # (B, L, hidden_dim)
        scores = ops.einsum("bid,bjd->bij", f, f)  # (B, L, L)
        positions = ops.arange(ops.shape(x)[1])
        distance = ops.expand_dims(positions, 1) - ops.expand_dims(positions, 0)  # (L, L)
        distance = ops.clip(distance, -MAX_DISTANCE, MAX_DISTANCE) + MAX_DISTANCE
        scores = scores + ops.cast(ops.take(self.distance_bias, distance), scores.dtype)
        key_mask = None if mask is None else ops.expand_dims(mask, 1)  # (B, 1, L)
        weights = masked_softmax(scores, key_mask, axis=-1)  # (B, L, L)
        return ops.einsum("bij,bjd->bid", weights, x)  # (B, L, hidden_dim)

    def _attend(self, a, b, mask_a=None, mask_b=None, training=None):
        """Soft alignments between a (B, L_a, d) and b (B, L_b, d).

        Returns `(beta, alpha, to_b, to_a)`: beta (B, L_a, d), alpha (B, L_b, d)
        and the two weight matrices, both laid out (B, L_a, L_b), zero at pairs
        that involve a padded word.
        """
        fa = self.attend_feedforward(a, training=training)  # (B, L_a, hidden_dim)
        fb = self.attend_feedforward(b, training=training)  # (B, L_b, hidden_dim)
        e = ops.einsum("bid,bjd->bij", fa, fb)  # (B, L_a, L_b)
        mask_a = None if mask_a is None else ops.expand_dims(mask_a, 2)  # (B, L_a, 1)
        mask_b = None if mask_b is None else ops.expand_dims(mask_b, 1)  # (B, 1, L_b)
        pairs = combine_masks(mask_a, mask_b)  # (B, L_a, L_b) or None
        to_b = masked_softmax(e, mask_b, axis=2)  # each a_i over the words of b
        to_a = masked_softmax(e, mask_a, axis=1)  # each b_j over the words of a
        if pairs is not None:
            to_b = to_b * ops.cast(pairs, to_b.dtype)
            to_a = to_a * ops.cast(pairs, to_a.dtype)
        beta = ops.einsum("bij,bjd->bid", to_b, b)  # (B, L_a, d)
        alpha = ops.einsum("bij,bid->bjd", to_a, a)  # (B, L_b, d)
        return beta, alpha, to_b, to_a

    def _compare_and_sum(self, x, aligned, mask, training=None):
        """sum_i G([x_i; aligned_i]) over the non-padded i: (B, L, d) -> (B, hidden_dim)."""
        v = self.compare_feedforward(ops.concatenate([x, aligned], -1), training=training)
        if mask is not None:
            v = v * ops.cast(ops.expand_dims(mask, -1), v.dtype)  # (B, L, hidden_dim)
        return ops.sum(v, axis=1)

    def _split(self, inputs):
        if not isinstance(inputs, (tuple, list)) or len(inputs) != 2:
            raise ValueError(
                "`inputs` must be a pair (premise_ids, hypothesis_ids). "
                f"Received: inputs={inputs!r}"
            )
        return inputs[0], inputs[1]

    def call(self, inputs, training=None):
        premise, hypothesis = self._split(inputs)
        a, mask_a = self._embed(premise, training)  # (B, L_a, d)
        b, mask_b = self._embed(hypothesis, training)  # (B, L_b, d)

        # 1. Attend.
        beta, alpha, _, _ = self._attend(a, b, mask_a, mask_b, training)

        # 2. Compare, and 3. aggregate.
        v1 = self._compare_and_sum(a, beta, mask_a, training)  # (B, hidden_dim)
        v2 = self._compare_and_sum(b, alpha, mask_b, training)  # (B, hidden_dim)
        v = self.aggregate_feedforward(ops.concatenate([v1, v2], -1), training=training)
        return self.classifier(v)  # (B, num_classes)

    def alignments(self, inputs):
        """The two soft alignment matrices, for plotting.

        Args:
            inputs: `(premise_ids, hypothesis_ids)`, int `(B, L_a)` and `(B, L_b)`.

        Returns:
            `(to_hypothesis, to_premise)`, both `(B, L_a, L_b)`. `to_hypothesis`
            [b, i, j] = softmax over j of e_ij: row i is how premise word i spreads
            over the hypothesis (rows sum to 1, the weights of beta_i).
            `to_premise`[b, i, j] = softmax over i of e_ij: column j is how
            hypothesis word j spreads over the premise (columns sum to 1, the
            weights of alpha_j); it is not transposed, so both share the axes.
            Entries that involve a padded word are 0.
        """
        premise, hypothesis = self._split(inputs)
        if not self.built:
            self.build()
        a, mask_a = self._embed(premise)
        b, mask_b = self._embed(hypothesis)
        _, _, to_b, to_a = self._attend(a, b, mask_a, mask_b)
        return to_b, to_a

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocab_size": self.vocab_size,
                "num_classes": self.num_classes,
                "embedding_dim": self.embedding_dim,
                "hidden_dim": self.hidden_dim,
                "dropout": self.dropout,
                "intra_attention": self.intra_attention,
                "mask_zero": self.mask_zero,
                "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
            }
        )
        return config
