"""TrainConfig checks every choice when it is made, before a file is read or a vocabulary learned."""

import re

import pytest

from keras_attention.training import recipe
from keras_attention.training.config import TrainConfig


@pytest.mark.parametrize("field, typo", [
    ("model", "transfromer"), ("preset", "huge"), ("dataset", "multi31k"), ("precision", "float8"),
    ("bucket_method", "shortest"), ("lr_schedule", "linear"),
])
def test_a_typo_in_a_choice_fails_at_construction(field, typo, tmp_path, monkeypatch):
    read = []
    monkeypatch.setattr(recipe, "training_data", lambda *args: read.append(args))  # must never be reached
    with pytest.raises(ValueError, match=re.escape(f"{field}={typo!r}")):
        recipe.train(TrainConfig(**{"dataset": "files", field: typo},
                                 train_files=(str(tmp_path / "missing.en"), str(tmp_path / "missing.de")),
                                 output_dir=str(tmp_path / "run")))
    assert read == [] and not (tmp_path / "run").exists()
