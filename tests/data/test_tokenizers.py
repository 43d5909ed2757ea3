import json
import os
import time
import unicodedata

import numpy as np
import pytest
import tensorflow as tf

from keras_attention.data import RESERVED_TOKENS, SubwordTokenizer, build_vocabulary


def normalized(sentence, lower_case=False):
    """The normal form the round trip must give back, written with Python only."""
    sentence = unicodedata.normalize("NFKC", sentence)
    return " ".join((sentence.lower() if lower_case else sentence).split())


def decode(strings):
    return [s.decode("utf-8") for s in strings.numpy()]


@pytest.mark.parametrize("lang", ["de", "en"])
def test_round_trip_on_multi30k_validation(lang, de_tokenizer, en_tokenizer, multi30k_dir, read_gz):
    tokenizer, lower_case = (de_tokenizer, False) if lang == "de" else (en_tokenizer, True)
    train = read_gz(os.path.join(multi30k_dir, f"train.{lang}.gz"))
    val = read_gz(os.path.join(multi30k_dir, f"val.{lang}.gz"))
    new_chars = set("".join(normalized(s, lower_case) for s in val)) - set(
        "".join(normalized(s, lower_case) for s in train)
    )
    print(f"\n{lang}: characters in val but not in train: {sorted(new_chars)}")
    ids = tokenizer.tokenize(val)
    back = decode(tokenizer.detokenize(ids))
    expected = [normalized(s, lower_case) for s in val]
    wrong = [(b, e) for b, e in zip(back, expected) if b != e]
    assert not wrong, wrong[:3]
    unknown = int(tf.reduce_sum(tf.cast(ids.flat_values == tokenizer.unk_id, tf.int32)))
    per_sentence = ids.flat_values.shape[0] / len(val)
    print(f"{lang}: {tokenizer.vocab_size} tokens, {per_sentence:.1f} a sentence, {unknown} [UNK]")
    if not new_chars:
        assert unknown == 0


def test_every_training_character_is_a_token(de_tokenizer, multi30k_dir, read_gz):
    chars = set("".join(normalized(s) for s in read_gz(os.path.join(multi30k_dir, "train.de.gz"))))
    chars.discard(" ")
    vocabulary = set(de_tokenizer.vocabulary)
    assert {c for c in chars if c not in vocabulary or "##" + c not in vocabulary} == set()
    assert len(de_tokenizer.vocabulary) == de_tokenizer.vocab_size <= 8000
    assert de_tokenizer.vocabulary[:4] == list(RESERVED_TOKENS)


def test_special_ids(de_tokenizer):
    tok = de_tokenizer
    assert (tok.pad_id, tok.unk_id, tok.start_id, tok.end_id) == (0, 1, 2, 3)
    ids = tok.token_to_id(["[PAD]", "[UNK]", "[START]", "[END]", "no-such-token-xyz"])
    assert ids.numpy().tolist() == [0, 1, 2, 3, 1]
    assert decode(tok.id_to_token([0, 3, tok.vocab_size + 5])) == ["[PAD]", "[END]", "[UNK]"]


def test_unknown_characters_map_to_unk(de_tokenizer):
    for word in ["\U0001f436", "一", "Hund\U0001f436"]:
        ids = de_tokenizer.tokenize(f"Ein {word} läuft.").numpy().tolist()
        assert ids == [*de_tokenizer.tokenize("Ein").numpy(), 1, *de_tokenizer.tokenize("läuft.")]


def test_detokenize_drops_pad_start_and_stops_at_end(de_tokenizer):
    tok = de_tokenizer
    hund = tok.tokenize("Ein Hund.").numpy().tolist()
    katze = tok.tokenize("Eine Katze").numpy().tolist()
    batch = [[2, *hund, 3, *katze, 0], [2, *katze, 3, 0, 0, 0, 0, 0]][:2]
    width = max(len(row) for row in batch)
    batch = [row + [0] * (width - len(row)) for row in batch]
    assert decode(tok.detokenize(tf.constant(batch))) == ["Ein Hund.", "Eine Katze"]
    ragged = tf.ragged.constant([[2, *hund], katze])
    assert decode(tok.detokenize(ragged)) == ["Ein Hund.", "Eine Katze"]
    assert tok.detokenize(tf.constant(hund)).numpy().decode() == "Ein Hund."


def test_tokenize_in_tf_function_and_dataset_map(de_tokenizer):
    sentences = ["Ein  Hund\u00a0läuft.", "Zwei Männer."]
    eager = de_tokenizer.tokenize(sentences)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def tokenize(strings):
        return de_tokenizer.tokenize(strings)

    assert tokenize(tf.constant(sentences)).to_list() == eager.to_list()
    mapped = tf.data.Dataset.from_tensor_slices(sentences).map(de_tokenizer.tokenize)
    assert [x.tolist() for x in mapped.as_numpy_iterator()] == eager.to_list()
    assert eager.dtype == tf.int32


def test_saved_and_reloaded_vocabulary_tokenizes_identically(
    en_tokenizer, multi30k_dir, read_gz, tmp_path
):
    path = str(tmp_path / "vocab.en.txt")
    en_tokenizer.save_vocabulary(path)
    with open(path, encoding="utf-8") as f:
        assert f.read().split("\n")[:-1] == en_tokenizer.vocabulary
    reloaded = SubwordTokenizer.from_vocabulary_file(path, lower_case=True)
    val = read_gz(os.path.join(multi30k_dir, "val.en.gz"))
    assert reloaded.tokenize(val).to_list() == en_tokenizer.tokenize(val).to_list()
    config = json.loads(json.dumps(en_tokenizer.get_config()))
    from_config = SubwordTokenizer.from_config(config)
    assert from_config.tokenize(val).to_list() == en_tokenizer.tokenize(val).to_list()


class _Translator(tf.Module):
    """What an exported model does with its tokenizers: strings in, strings out."""

    def __init__(self, tokenizer):
        super().__init__()
        self.tokenizer = tokenizer

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def tokenize(self, strings):
        return self.tokenizer.tokenize(strings).to_tensor()

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
    def detokenize(self, ids):
        return self.tokenizer.detokenize(ids)


def test_tokenizer_inside_a_saved_model(de_tokenizer, tmp_path):
    path = str(tmp_path / "saved")
    tf.saved_model.save(_Translator(de_tokenizer), path)
    loaded = tf.saved_model.load(path)
    sentences = tf.constant(["Ein Hund läuft über die Wiese.", "Zwei Kinder \U0001f436."])
    expected = de_tokenizer.tokenize(sentences).to_tensor()
    ids = loaded.tokenize(sentences)
    np.testing.assert_array_equal(ids.numpy(), expected.numpy())
    back = decode(loaded.detokenize(ids))
    assert back == ["Ein Hund läuft über die Wiese.", "Zwei Kinder [UNK]"]


def test_small_vocabulary_and_options():
    text = ["Der Hund läuft.", "DIE KATZE SCHLÄFT!", "ﬁve ﬁsh"]  # "ﬁ" is a ligature.
    started = time.perf_counter()
    tok = SubwordTokenizer.from_dataset(text, vocab_size=200, lower_case=True)
    assert time.perf_counter() - started < 30
    assert "ﬁ" not in tok.vocabulary and "f" in tok.vocabulary  # NFKC: "ﬁ" -> "fi".
    assert decode(tok.detokenize(tok.tokenize(text))) == [normalized(s, True) for s in text]
    raw = SubwordTokenizer.from_dataset(text, vocab_size=200, normalization=None)
    assert "ﬁ" in raw.vocabulary
    assert decode(raw.detokenize(raw.tokenize(text))) == text


def test_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match="vocab_size=3"):
        build_vocabulary(["a dog"], vocab_size=3)
    with pytest.raises(ValueError, match="vocab_size=10"):  # Too small for the characters.
        build_vocabulary(["abcdefgh"], vocab_size=10)
    with pytest.raises(ValueError, match="vocab_size=0"):
        build_vocabulary(["a dog"], vocab_size=0)
    with pytest.raises(ValueError, match="reserved_tokens"):
        build_vocabulary(["a dog"], vocab_size=100, reserved_tokens=["[UNK]", "[PAD]"])
    with pytest.raises(ValueError, match="normalization='NFX'"):
        build_vocabulary(["a dog"], vocab_size=100, normalization="NFX")
    with pytest.raises(ValueError, match="element_spec"):
        build_vocabulary(tf.data.Dataset.from_tensor_slices((["a"], ["b"])), vocab_size=100)
    with pytest.raises(ValueError, match="vocabulary"):
        SubwordTokenizer(["a", "[PAD]", "[UNK]", "[START]", "[END]"])
    with pytest.raises(ValueError, match="repeated"):
        SubwordTokenizer(["[PAD]", "[UNK]", "[START]", "[END]", "a", "a"])


def test_tables_from_the_vocabulary_file_become_saved_model_assets(tmp_path):
    text = ["Der Hund läuft.", "Die Katze schläft über dem Hund."]
    tok = SubwordTokenizer.from_dataset(text, vocab_size=120, lower_case=True)
    path = tmp_path / "vocab.txt"
    tok.save_vocabulary(path)
    from_file = SubwordTokenizer.from_vocabulary_file(path, tables_from_file=True, lower_case=True)
    assert from_file.vocabulary == tok.vocabulary and from_file.id_table is not None
    sentences = ["Die Katze läuft.", "Ein Zebra!", ""]
    ids = tok.tokenize(sentences)
    assert from_file.tokenize(sentences).to_list() == ids.to_list()
    assert decode(from_file.detokenize(ids)) == decode(tok.detokenize(ids))
    assert decode(from_file.id_to_token([0, 3, 10_000, -1])) == ["[PAD]", "[END]", "[UNK]", "[UNK]"]
    assert from_file.token_to_id(["[END]", "zebra-xyz"]).numpy().tolist() == [3, 1]

    saved = str(tmp_path / "saved")
    tf.saved_model.save(_Translator(from_file), saved)
    path.unlink()  # the SavedModel must carry its own copy
    assert os.listdir(os.path.join(saved, "assets")) == ["vocab.txt"]
    loaded = tf.saved_model.load(saved)
    assert decode(loaded.detokenize(loaded.tokenize(tf.constant(sentences)))) == ["die katze läuft.", "ein [UNK]", ""]

    tok.save_vocabulary(path)
    with pytest.raises(ValueError, match="vocabulary_file="):
        SubwordTokenizer(tok.vocabulary[:-1], vocabulary_file=str(path))


def test_bytes_that_are_not_utf8_become_replacement_characters():
    tok = SubwordTokenizer(["[PAD]", "[UNK]", "[START]", "[END]", "a", "\ufffd", "##\ufffd"])
    raw = [b"a \xff\xfe a", b"\xc3", b"a\xe2\x80"]
    assert decode(tok.normalize(raw)) == [s.decode("utf-8", "replace") for s in raw]
    assert tok.tokenize(raw).to_list() == [[4, 5, 6, 4], [5], [4, 6]]


def test_a_text_with_few_distinct_pieces_finds_its_threshold_in_a_few_tries(monkeypatch):
    # Dates written as "1999-03-04": 11 characters, pieces shared by thousands of words, so the vocabulary
    # size stays flat over wide ranges of the count threshold. Each try learns a whole vocabulary.
    from keras_attention.data import load_dates, vocabulary

    tries = []
    learn = vocabulary.learner.learn_with_thresh
    monkeypatch.setattr(vocabulary.learner, "learn_with_thresh",
                        lambda counts, threshold, params: tries.append(threshold) or learn(counts, threshold, params))
    targets = load_dates(2000, "train", seed=1).map(lambda source, target: target)
    vocab = build_vocabulary(targets, vocab_size=60)
    assert len(vocab) == 60 and len(tries) <= 8, tries  # the bracket shrinks by a quarter a try, at least
