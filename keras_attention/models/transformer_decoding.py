"""Step-by-step decoding for the `Transformer`: the state a decoding loop carries, and one step.

`keras_attention.decoding` (greedy, sampling, beam search) drives any model
that has these methods; here they are for the Transformer, whose state is each
decoder block's self-attention key/value cache and its cross-attention keys
and values, projected once from the encoder output.
"""

from keras import ops


class TransformerDecoding:
    """The decoding-step methods of `Transformer` (a mixin: it reads the model's
    `encode`, `target_embedding`, `decoder_blocks`, `decoder_norm`, `_logits`
    and `target_vocab_size`)."""

    # State entries that depend on the source alone; beam search never reorders them.
    decoding_constants = ("encoder_output", "source_mask", "cross_cache")

    def _check_decoder_built(self):
        if not all(block.built for block in self.decoder_blocks):
            raise ValueError(
                "The Transformer has no decoder weights yet: call it once on a batch, "
                "`model((source_ids, target_in))`, or load a trained one, before decoding step by step. "
                "Received: an unbuilt model"
            )

    def init_decoding_state(self, source_ids, max_length):
        """Everything a decoding loop carries, as a dict of batch-major tensors.

        The encoder runs once; each decoder block gets an empty self-attention
        cache of `max_length` positions and its cross-attention keys and
        values, projected once. Every entry has the batch on axis 0, so beam
        search can repeat and reorder it with `keras.tree.map_structure`.
        """
        self._check_decoder_built()
        encoder_output, source_mask = self.encode(source_ids, training=False)
        batch = ops.shape(source_ids)[0]
        self_caches = [
            block.init_self_attention_cache(batch, max_length, self.compute_dtype)
            for block in self.decoder_blocks
        ]
        cross_caches = [block.compute_cross_attention_cache(encoder_output) for block in self.decoder_blocks]
        return {
            "encoder_output": encoder_output,
            "source_mask": source_mask,
            "self_cache": tuple(self_caches),  # L x ((B, N, T_max, H), (B, N, T_max, H))
            "cross_cache": tuple(cross_caches),  # L x ((B, N, S, H), (B, N, S, H))
        }

    def init_beam_state(self, source_ids, max_length, beam_size):
        """The decoding state of a beam of `beam_size` hypotheses per source row.

        Unlike repeating `init_decoding_state` K times, the source side is kept
        once per row (encoder output and cross-attention keys and values,
        `(B, ...)`), and each block's self-attention cache is shared by the
        row's K hypotheses (`max_length * K` positions), position-major
        (slot `j * K + k` holds the key of position `j` written by beam slot
        `k`). `history` `(B, K, max_length)` says, for each hypothesis and
        position, which beam slot's key it reads there (-1: not written yet).
        When beam search reorders the hypotheses it reorders this small int
        table (`reorder_beam_state`) instead of copying every cache, so a
        step's cost does not grow with `max_length` through copies.
        """
        self._check_decoder_built()
        encoder_output, source_mask = self.encode(source_ids, training=False)
        batch = ops.shape(source_ids)[0]
        return {
            "encoder_output": encoder_output,
            "source_mask": source_mask,
            "self_cache": tuple(
                block.init_self_attention_cache(batch, max_length * beam_size, self.compute_dtype)
                for block in self.decoder_blocks
            ),  # L x ((B, N, T_max * K, H), (B, N, T_max * K, H))
            "cross_cache": tuple(block.compute_cross_attention_cache(encoder_output) for block in self.decoder_blocks),
            "history": ops.full((batch, beam_size, max_length), -1, "int32"),  # (B, K, T_max)
        }

    def grow_decoding_state(self, state, max_length):
        """The state of `init_decoding_state` or `init_beam_state` with room for
        `max_length` positions: the self-attention caches gain empty slots at the
        end (position-major, so a beam state's slots keep their places) and a
        beam state's `history` gains unwritten (-1) positions."""
        beam = state["history"].shape[1] if "history" in state else 1

        def grow(cache):  # (B, N, T * K, H) -> (B, N, max_length * K, H)
            extra = max_length * beam - cache.shape[2]
            if extra < 0:
                raise ValueError(
                    f"`max_length` must be at least the state's {cache.shape[2] // beam} positions. "
                    f"Received: max_length={max_length}"
                )
            return ops.pad(cache, [[0, 0], [0, 0], [0, extra], [0, 0]])

        grown = dict(state, self_cache=tuple(tuple(grow(t) for t in pair) for pair in state["self_cache"]))
        if "history" in state:
            history = state["history"]  # (B, K, T) -> (B, K, max_length)
            grown["history"] = ops.pad(
                history, [[0, 0], [0, 0], [0, max_length - history.shape[2]]], constant_values=-1
            )
        return grown

    def reorder_beam_state(self, state, parents):
        """Hypothesis k of row b continues hypothesis `parents[b, k]`: copy its history."""
        history = state["history"]
        index = ops.broadcast_to(ops.expand_dims(parents, -1), ops.shape(history))  # (B, K, T_max)
        return dict(state, history=ops.take_along_axis(history, index, axis=1))

    def decode_step(self, state, tokens, index):
        """One decoding step.

        Args:
            state: the dict from `init_decoding_state` or `init_beam_state`
                (or a previous step).
            tokens: int `(B,)` (or `(B * K,)` for a beam state, row
                `b * K + k`), the token at position `index` of the target input.
            index: scalar int, the position being fed (0 for [START]).

        Returns:
            `(logits (B, V) float32, new_state, attention (B, S))`, where the
            attention is the last block's cross-attention averaged over heads
            (`B * K` rows for a beam state).
        """
        x = self.target_embedding(ops.expand_dims(tokens, 1), start_index=index)  # (B, 1, d) or (BK, 1, d)
        beam_options = {}
        if "history" in state:
            # The K hypotheses of a row go through the blocks as a sequence of
            # K queries: they share the row's cross-attention keys and values
            # and its self-attention cache, where each reads its own prefix.
            history = state["history"]
            beam = history.shape[1]
            slots = ops.arange(beam, dtype="int32")
            history = ops.slice_update(  # position `index` of slot k: its own key
                history, [0, 0, index], ops.broadcast_to(slots[None, :, None], (ops.shape(history)[0], beam, 1))
            )
            state = dict(state, history=history)
            own = ops.equal(ops.expand_dims(history, -1), slots)  # (B, K, T_max, K)
            batch, max_length = ops.shape(history)[0], ops.shape(history)[2]
            x = ops.reshape(x, (batch, beam, ops.shape(x)[-1]))  # (B, K, d)
            beam_options = dict(
                decoder_attention_mask=ops.reshape(own, (batch, beam, max_length * beam)),  # (B, K, T_max*K)
                self_attention_cache_update_index=index * beam,
                use_causal_mask=False,  # `history` already hides every later position
            )
        new_self_caches = []
        scores = None
        for i, block in enumerate(self.decoder_blocks):
            options = dict(self_attention_cache_update_index=index)
            options.update(beam_options)
            x, scores, cache = block(
                x,
                state["encoder_output"],
                encoder_padding_mask=state["source_mask"],
                self_attention_cache=state["self_cache"][i],
                cross_attention_cache=state["cross_cache"][i],
                return_attention_scores=True,
                **options,
            )
            new_self_caches.append(cache)
        if self.decoder_norm is not None:
            x = self.decoder_norm(x)
        rows = ops.shape(tokens)[0]
        # The vocabulary size stays static (a graph's reshape to (rows, -1) loses
        # it): beam search picks its per-hypothesis shortlist only when it knows V.
        logits = ops.reshape(self._logits(x), (rows, self.target_vocab_size))  # (B, V) or (BK, V)
        attention = ops.mean(ops.cast(scores, "float32"), axis=1)  # (B, 1 or K, S)
        attention = ops.reshape(attention, (rows, ops.shape(attention)[-1]))  # (B, S) or (BK, S)
        new_state = dict(state, self_cache=tuple(new_self_caches))
        return logits, new_state, attention
