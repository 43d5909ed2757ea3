import datetime
import re

import pytest

from keras_attention.data import generate_dates, load_dates


def test_same_seed_same_pairs_other_seed_other_pairs():
    first = list(load_dates(500, seed=7).as_numpy_iterator())
    again = list(load_dates(500, seed=7).as_numpy_iterator())
    other = list(load_dates(500, seed=8).as_numpy_iterator())
    assert len(first) == 500 and first == again and first != other


def test_targets_are_iso_dates_in_range():
    sources, targets = generate_dates(2000, seed=1)
    for target in targets:
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", target)
        day = datetime.date.fromisoformat(target)
        assert datetime.date(1900, 1, 1) <= day <= datetime.date(2099, 12, 31)
    assert len(set(sources)) > 1900  # Varied, few repeats.


def test_english_and_numeric_sources_mean_their_target():
    # An independent reading of the formats with datetime.strptime.
    formats = [
        "%d %B %Y", "%B %d, %Y", "%b %d %Y", "%d-%b-%Y", "%A, %B %d, %Y", "%A %d %b %Y",
        "%d.%m.%Y", "%m/%d/%Y", "%Y-%m-%d", "%Y%m%d",
    ]  # fmt: skip
    sources, targets = generate_dates(3000, seed=2, languages=("en",))
    checked = 0
    for source, target in zip(sources, targets):
        text = re.sub(r"(\d)(st|nd|rd|th)\b", r"\1", source.lower()).replace("the ", "")
        text = text.replace(" of ", " ")
        for fmt in formats:
            try:
                parsed = datetime.datetime.strptime(text, fmt).date()
            except ValueError:
                continue
            assert parsed.isoformat() == target, (source, target)
            checked += 1
            break
    assert checked > 2500  # Nearly all English sources are read back.


FRENCH = "janvier février mars avril mai juin juillet août septembre octobre novembre décembre"
GERMAN = "Januar Februar März April Mai Juni Juli August September Oktober November Dezember"


def test_french_and_german_sources_mean_their_target():
    sources, targets = generate_dates(2000, seed=3, languages=("fr", "de"))
    names = [set(m) for m in zip(FRENCH.lower().split(), GERMAN.lower().split())]
    for source, target in zip(sources, targets):
        year, month, day = target.split("-")
        numbers = re.findall(r"\d+", source)
        if year + month + day in numbers:  # 20210103
            continue
        assert year in numbers and int(day) in [int(n) for n in numbers], (source, target)
        words = [w.strip(".,") for w in source.lower().split() if len(w.strip(".,")) >= 3]
        named = {m for m in range(12) for w in words for n in names[m] if n.startswith(w)}
        if named:  # A month name, or its abbreviation.
            assert named == {int(month) - 1}, (source, target)
        else:
            assert int(month) in [int(n) for n in numbers], (source, target)


def test_splits_share_no_date():
    dates = {s: set(generate_dates(5000, s, seed=0)[1]) for s in ("train", "val", "test")}
    assert not dates["train"] & dates["val"]
    assert not dates["train"] & dates["test"]
    assert not dates["val"] & dates["test"]
    # Whatever the seed: the split of a date is fixed.
    other_seed = set(generate_dates(5000, "train", seed=99)[1])
    assert not other_seed & dates["val"]


def test_bad_arguments():
    with pytest.raises(ValueError, match="split='dev'"):
        load_dates(10, split="dev")
    with pytest.raises(ValueError, match="num_examples=0"):
        load_dates(0)
    with pytest.raises(ValueError, match="languages=\\('es',\\)"):
        load_dates(10, languages=("es",))
