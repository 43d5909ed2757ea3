"""RNN encoder-decoders: the fixed-vector baseline, Bahdanau and Luong attention."""

import keras
from keras import ops

from keras_attention.base.validation import check_choice, check_positive_int, check_rate
from keras_attention.layers import BahdanauAttention, LuongAttention
from keras_attention.models.optimizer_build import BuildsOptimizerBeforeTracing
from keras_attention.models.time_scan import scan_carry

# Named sizes for `Seq2SeqRNN.from_preset` (and `train --model bahdanau --preset ...`).
RNN_PRESETS = {
    "tiny": dict(embedding_dim=64, units=128, dropout=0.1),
    "small": dict(embedding_dim=256, units=256, dropout=0.2),
    "base": dict(embedding_dim=256, units=512, dropout=0.3),
    "big": dict(embedding_dim=512, units=1024, dropout=0.3),
}


@keras.saving.register_keras_serializable(package="keras_attention")
class Seq2SeqRNN(BuildsOptimizerBeforeTracing, keras.Model):
    """A recurrent encoder-decoder, with or without attention.

    The encoder is a (by default bidirectional) GRU or LSTM over the source
    embeddings; a dense `tanh` bridge turns its final states into the
    decoder's initial state. The decoder depends on `attention`:

    - `None`: the fixed-vector model of Cho et al. (2014,
      https://arxiv.org/abs/1406.1078) and Sutskever et al. (2014,
      https://arxiv.org/abs/1409.3215). The whole source is summarised in the
      bridge vector c, which is also fed to every decoder step
      (s_t = RNN([y_{t-1}; c], s_{t-1})); long sentences suffer from this
      bottleneck.
    - `"bahdanau"`: Bahdanau et al. (2014, https://arxiv.org/abs/1409.0473).
      The previous decoder state queries the encoder states with additive
      attention; the context c_t enters the recurrence,
      s_t = RNN([y_{t-1}; c_t], s_{t-1}), and the output layer reads
      [s_t; c_t; y_{t-1}].
    - `"luong"`: Luong et al. (2015, https://arxiv.org/abs/1508.04025). The
      new state h_t queries the encoder states (score "dot", "general" or
      "concat", global or local-p with `luong_window`); the attentional state
      h~_t = tanh(W_c [c_t; h_t]) gives the output and is fed into the next
      step's input ("input feeding", section 3.3). The "dot" and "general"
      scores are divided by sqrt(units) (`luong_scaled`, an addition to the
      paper, see `LuongAttention`): unscaled, they saturate the softmax early
      in training under Adam and the model stops using its attention.

    Embeddings start from N(0, 1) (the initialisation of PyTorch's
    `nn.Embedding` and of OpenNMT), not Keras' U(-0.05, 0.05). With Keras'
    default every signal starts tiny (embeddings of RMS 0.03, encoder states
    of 0.01), and Luong's multiplicative score, a product of two such
    vectors, starts flat and learns slowly (measured on the generated dates
    corpus by `scripts/ablations/ablate_embedding_init.py`, in
    `benchmarks/embedding_init.json`).

    The same step function runs the teacher-forced pass (with `ops.scan` over
    the target) and step-by-step decoding (`decode_step`), so the two agree.
    Token id 0 is padding.

    Args:
        source_vocab_size: int. Source vocabulary size.
        target_vocab_size: int. Target vocabulary size.
        attention: None, "bahdanau" or "luong". Defaults to "bahdanau".
        cell: "gru" or "lstm". Defaults to "gru".
        embedding_dim: int. Defaults to 256.
        units: int. Decoder state size (and per-direction encoder size).
            Defaults to 512.
        bidirectional_encoder: bool. Defaults to True.
        dropout: float. Dropout on embeddings and on the output layer's input.
            Defaults to 0.1.
        attention_units: int. Hidden size of the additive/concat score.
            Defaults to `units`.
        luong_score: "dot", "general" or "concat". Defaults to "general".
        luong_window: int or None. Local-p attention with half-width D.
        luong_scaled: bool. Divide the "dot" and "general" scores by
            sqrt(units). Defaults to True (models saved before this option
            existed reload with False, as they were trained).
        embeddings_initializer: initializer of both embeddings. Defaults to
            `RandomNormal(stddev=1.0)`.
        **kwargs: standard `keras.Model` arguments.

    Call arguments:
        inputs: `(source_ids (B, S), target_in (B, T))`, int.
        training: bool.

    Returns:
        float32 logits `(B, T, target_vocab_size)`.

    Example:

    >>> model = Seq2SeqRNN(50, 60, attention="luong", units=32, embedding_dim=16)
    >>> source = keras.ops.ones((2, 7), "int32"); target_in = keras.ops.ones((2, 5), "int32")
    >>> tuple(model((source, target_in)).shape)
    (2, 5, 60)
    """

    def __init__(
        self,
        source_vocab_size,
        target_vocab_size,
        attention="bahdanau",
        cell="gru",
        embedding_dim=256,
        units=512,
        bidirectional_encoder=True,
        dropout=0.1,
        attention_units=None,
        luong_score="general",
        luong_window=None,
        luong_scaled=True,
        embeddings_initializer=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.source_vocab_size = check_positive_int("source_vocab_size", source_vocab_size)
        self.target_vocab_size = check_positive_int("target_vocab_size", target_vocab_size)
        self.attention = check_choice("attention", attention, (None, "bahdanau", "luong"))
        self.cell = check_choice("cell", cell, ("gru", "lstm"))
        self.embedding_dim = check_positive_int("embedding_dim", embedding_dim)
        self.units = check_positive_int("units", units)
        self.bidirectional_encoder = bool(bidirectional_encoder)
        self.dropout = check_rate("dropout", dropout)
        self.attention_units = (
            units if attention_units is None else check_positive_int("attention_units", attention_units)
        )
        self.luong_score = luong_score
        self.luong_window = luong_window
        self.luong_scaled = bool(luong_scaled)
        if embeddings_initializer is None:
            embeddings_initializer = keras.initializers.RandomNormal(stddev=1.0)
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)

        policy = self.dtype_policy
        self.source_embedding = keras.layers.Embedding(
            source_vocab_size, embedding_dim, embeddings_initializer=self._new_initializer(),
            dtype=policy, name="source_embedding",
        )
        self.target_embedding = keras.layers.Embedding(
            target_vocab_size, embedding_dim, embeddings_initializer=self._new_initializer(),
            dtype=policy, name="target_embedding",
        )
        rnn = keras.layers.GRU if cell == "gru" else keras.layers.LSTM
        encoder = rnn(units, return_sequences=True, return_state=True, dtype=policy, name="encoder_rnn")
        if self.bidirectional_encoder:
            encoder = keras.layers.Bidirectional(encoder, dtype=policy, name="encoder")
        self.encoder = encoder
        self.num_states = 1 if cell == "gru" else 2
        self.bridges = [
            keras.layers.Dense(units, activation="tanh", dtype=policy, name=f"bridge_{i}")
            for i in range(self.num_states)
        ]
        cell_cls = keras.layers.GRUCell if cell == "gru" else keras.layers.LSTMCell
        self.decoder_cell = cell_cls(units, dtype=policy, name="decoder_cell")
        self.attention_layer = None
        if attention == "bahdanau":
            self.attention_layer = BahdanauAttention(self.attention_units, dtype=policy, name="attention")
        elif attention == "luong":
            self.attention_layer = LuongAttention(
                score=luong_score,
                window=luong_window,
                scaled=self.luong_scaled and luong_score != "concat",
                units=self.attention_units,
                dtype=policy,
                name="attention",
            )
            self.luong_combine = keras.layers.Dense(
                units, activation="tanh", use_bias=False, dtype=policy, name="attentional_state"
            )
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=policy)
        self.output_projection = keras.layers.Dense(
            target_vocab_size, dtype=policy, name="output_projection"
        )

    def _new_initializer(self):
        """A fresh copy of `embeddings_initializer` (each layer draws its own weights)."""
        return keras.initializers.deserialize(keras.initializers.serialize(self.embeddings_initializer))

    # Encoder ------------------------------------------------------------------

    def encode(self, source_ids, training=None):
        """Run the encoder; return the decoder's initial recurrent carry and the
        per-sequence constants (encoder states, mask, projected keys)."""
        source_mask = ops.not_equal(source_ids, 0)
        x = self.dropout_layer(self.source_embedding(source_ids), training=training)
        results = self.encoder(x, mask=source_mask, training=training)
        encoder_output, finals = results[0], results[1:]
        if self.bidirectional_encoder:
            # finals = forward states then backward states: [h_f(, c_f), h_b(, c_b)]
            n = self.num_states
            finals = [ops.concatenate([finals[i], finals[n + i]], axis=-1) for i in range(n)]
        states = tuple(bridge(f) for bridge, f in zip(self.bridges, finals))  # each (B, units)
        constants = {"encoder_output": encoder_output, "source_mask": source_mask}
        if self.attention_layer is None:
            constants["summary"] = states[0]  # the fixed vector c
        else:
            if not self.attention_layer.built:
                self.attention_layer.build((None, self.units), encoder_output.shape)
            constants["projected_keys"] = self.attention_layer.project_keys(encoder_output)
        carry = {"states": states}
        if self.attention == "luong":
            carry["feed"] = ops.zeros_like(states[0])  # h~_0
        return carry, constants

    # One decoder step (shared by training and decoding) -------------------------

    def _attend(self, query, constants):
        return self.attention_layer(
            query,
            constants["encoder_output"],
            value_mask=constants["source_mask"],
            projected_keys=constants["projected_keys"],
            return_attention_scores=True,
        )  # (B, d_enc), (B, S)

    def _step(self, carry, embedded, constants, training=None):
        """(carry, y_{t-1} embedded (B, E)) -> (carry, output features, attention)."""
        states = list(carry["states"])
        if self.attention is None:
            summary = constants["summary"]
            h, states = self.decoder_cell(ops.concatenate([embedded, summary], -1), states, training=training)
            return {"states": tuple(states)}, ops.concatenate([h, summary], -1), None
        if self.attention == "bahdanau":
            context, weights = self._attend(states[0], constants)  # query: s_{t-1}
            cell_input = ops.concatenate([embedded, context], -1)
            h, states = self.decoder_cell(cell_input, states, training=training)
            features = ops.concatenate([h, context, embedded], -1)
            return {"states": tuple(states)}, features, weights
        # Luong with input feeding.
        cell_input = ops.concatenate([embedded, carry["feed"]], -1)
        h, states = self.decoder_cell(cell_input, states, training=training)
        context, weights = self._attend(h, constants)  # query: h_t
        attentional = self.luong_combine(ops.concatenate([context, h], -1))  # h~_t (B, units)
        return {"states": tuple(states), "feed": attentional}, attentional, weights

    def _logits(self, features, training=None):
        features = self.dropout_layer(features, training=training)
        return ops.cast(self.output_projection(features), "float32")

    # Full pass (teacher forcing) ------------------------------------------------

    def call(self, inputs, training=None, return_attention=False):
        source_ids, target_in = inputs
        carry, constants = self.encode(source_ids, training=training)
        embedded = self.dropout_layer(self.target_embedding(target_in), training=training)
        steps = ops.transpose(embedded, (1, 0, 2))  # (T, B, E): scan runs over time

        # The carry also holds each step's output features and attention
        # weights, so that stacking the carries over time gives the outputs.
        batch = ops.shape(source_ids)[0]
        carry["features"] = ops.zeros((batch, self._features_dim(constants)), embedded.dtype)
        if self.attention is not None:
            carry["weights"] = ops.zeros_like(ops.cast(constants["source_mask"], embedded.dtype))

        def step(carry, x):
            new_carry, features, weights = self._step(carry, x, constants)
            new_carry["features"] = features
            if weights is not None:
                new_carry["weights"] = ops.cast(weights, x.dtype)
            return new_carry

        outputs = scan_carry(step, carry, steps)  # every entry (T, B, ...)
        features = ops.transpose(outputs["features"], (1, 0, 2))  # (B, T, F)
        logits = self._logits(features, training=training)
        if not return_attention:
            return logits
        if self.attention is None:
            return logits, None
        return logits, ops.transpose(outputs["weights"], (1, 0, 2))  # (B, T, V), (B, T, S)

    def _features_dim(self, constants):
        """Width of what a step hands to the output layer."""
        if self.attention is None:
            return 2 * self.units  # [s_t; c]
        if self.attention == "bahdanau":
            return self.units + constants["encoder_output"].shape[-1] + self.embedding_dim
        return self.units  # h~_t

    # Step-by-step decoding ------------------------------------------------------

    # State entries that depend on the source alone; beam search never reorders them.
    decoding_constants = ("encoder_output", "source_mask", "summary", "projected_keys")

    def init_decoding_state(self, source_ids, max_length=None):
        """The decoding loop's state: a dict of batch-major tensors."""
        carry, constants = self.encode(source_ids, training=False)
        return {**constants, **carry}

    def decode_step(self, state, tokens, index=None):
        """tokens `(B,)` -> `(logits (B, V), new_state, attention (B, S) or None)`.

        `index` is accepted for the common decoding interface; an RNN carries
        its position in its state.
        """
        carry = {k: state[k] for k in ("states", "feed") if k in state}
        carry, features, weights = self._step(carry, self.target_embedding(tokens), state)
        return self._logits(features), {**state, **carry}, weights

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "source_vocab_size": self.source_vocab_size,
                "target_vocab_size": self.target_vocab_size,
                "attention": self.attention,
                "cell": self.cell,
                "embedding_dim": self.embedding_dim,
                "units": self.units,
                "bidirectional_encoder": self.bidirectional_encoder,
                "dropout": self.dropout,
                "attention_units": self.attention_units,
                "luong_score": self.luong_score,
                "luong_window": self.luong_window,
                "luong_scaled": self.luong_scaled,
                "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
            }
        )
        return config

    @classmethod
    def from_preset(cls, preset, source_vocab_size, target_vocab_size, **overrides):
        """A model of a named size: "tiny", "small", "base" or "big" (`RNN_PRESETS`).

        >>> model = Seq2SeqRNN.from_preset("tiny", 1000, 1200, attention="luong")
        >>> model.units
        128
        """
        check_choice("preset", preset, tuple(RNN_PRESETS))
        return cls(source_vocab_size, target_vocab_size, **{**RNN_PRESETS[preset], **overrides})

    @classmethod
    def from_config(cls, config):
        # Configs saved before `luong_scaled` existed describe unscaled models.
        return cls(**{"luong_scaled": False, **config})
