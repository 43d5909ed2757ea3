"""A generated translation corpus: dates in human formats -> ISO 8601.

"3 January 2021", "Sunday, January 3rd, 2021", "03.01.2021", "1/3/2021",
"3. Januar 2021", "dimanche 3 janvier 2021"... all translate to "2021-01-03".
The task needs attention in a small way (the day, month and year move around
and the month name must be looked up), has no ambiguity (a dot means
day.month.year, a slash month/day/year), and is learned in minutes on a CPU,
so it serves offline demos, tutorials and fast tests.

The dates from 1900-01-01 to 2099-12-31 are split once and for all, whatever
the seed, into train (80%), val (10%) and test (10%) by a hash of the date, so
no date of one split appears in another.
"""

import datetime
import random

import tensorflow as tf

from keras_attention.base.validation import check_choice, check_positive_int

SPLITS = ("train", "val", "test")
LANGUAGES = ("en", "fr", "de")
FIRST_DAY = datetime.date(1900, 1, 1)
LAST_DAY = datetime.date(2099, 12, 31)

MONTHS = {
    "en": "January February March April May June July August September October November "
    "December".split(),
    "fr": "janvier février mars avril mai juin juillet août septembre octobre novembre "
    "décembre".split(),
    "de": "Januar Februar März April Mai Juni Juli August September Oktober November "
    "Dezember".split(),
}
SHORT_MONTHS = {
    "en": "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(),
    "fr": "janv. févr. mars avr. mai juin juil. août sept. oct. nov. déc.".split(),
    "de": "Jan. Feb. März Apr. Mai Juni Juli Aug. Sept. Okt. Nov. Dez.".split(),
}
WEEKDAYS = {  # Monday first, as date.weekday() counts.
    "en": "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split(),
    "fr": "lundi mardi mercredi jeudi vendredi samedi dimanche".split(),
    "de": "Montag Dienstag Mittwoch Donnerstag Freitag Samstag Sonntag".split(),
}


def _ordinal(day):
    if day in (11, 12, 13):
        return f"{day}th"
    suffix = {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def _spelled(d, lang, rng):
    """Formats with month names, in language `lang`."""
    month, short = MONTHS[lang][d.month - 1], SHORT_MONTHS[lang][d.month - 1]
    weekday = WEEKDAYS[lang][d.weekday()]
    if lang == "en":
        choices = [
            f"{d.day} {month} {d.year}",
            f"{month} {d.day}, {d.year}",
            f"{short} {d.day} {d.year}",
            f"{d.day:02d}-{short}-{d.year}",
            f"{weekday}, {month} {d.day}, {d.year}",
            f"{month} {_ordinal(d.day)}, {d.year}",
            f"the {_ordinal(d.day)} of {month} {d.year}",
            f"{weekday} {d.day} {short} {d.year}",
        ]
    elif lang == "fr":
        day = "1er" if d.day == 1 else str(d.day)
        choices = [
            f"{day} {month} {d.year}",
            f"{weekday} {day} {month} {d.year}",
            f"{d.day} {short} {d.year}",
            f"le {day} {month} {d.year}",
        ]
    else:
        choices = [
            f"{d.day}. {month} {d.year}",
            f"{weekday}, {d.day}. {month} {d.year}",
            f"{d.day}. {short} {d.year}",
            f"am {d.day}. {month} {d.year}",
        ]
    text = rng.choice(choices)
    case = rng.random()
    if case < 0.15:
        return text.upper()
    if case < 0.3:
        return text.lower()
    return text


def _numeric(d, rng):
    """Formats with numbers only; the separator tells the order of fields."""
    return rng.choice(
        [
            f"{d.day:02d}.{d.month:02d}.{d.year}",
            f"{d.day}.{d.month}.{d.year}",
            f"{d.month}/{d.day}/{d.year}",
            f"{d.month:02d}/{d.day:02d}/{d.year}",
            f"{d.year}-{d.month:02d}-{d.day:02d}",
            f"{d.year}{d.month:02d}{d.day:02d}",
        ]
    )


def format_date(date, rng, languages=LANGUAGES):
    """Write `date` in a human format picked with `rng` (a `random.Random`)."""
    if rng.random() < 0.25:
        return _numeric(date, rng)
    return _spelled(date, rng.choice(languages), rng)


def date_split(date):
    """The split (`"train"`, `"val"` or `"test"`) a date belongs to, by a fixed hash."""
    bucket = (date.toordinal() * 2654435761) % (2**32) % 10
    return "val" if bucket == 8 else "test" if bucket == 9 else "train"


def generate_dates(num_examples=20000, split="train", seed=0, languages=LANGUAGES):
    """Generate date pairs as two lists of str; see `load_dates`."""
    check_positive_int("num_examples", num_examples)
    check_choice("split", split, SPLITS)
    if isinstance(languages, str) or not languages or any(
        lang not in LANGUAGES for lang in languages
    ):
        raise ValueError(
            f"`languages` must be a non-empty sequence of {LANGUAGES}. "
            f"Received: languages={languages!r}"
        )
    rng = random.Random(f"keras_attention.dates:{seed}:{split}")
    span = (LAST_DAY - FIRST_DAY).days + 1
    sources, targets = [], []
    while len(sources) < num_examples:
        date = FIRST_DAY + datetime.timedelta(days=rng.randrange(span))
        if date_split(date) != split:
            continue
        sources.append(format_date(date, rng, tuple(languages)))
        targets.append(date.isoformat())
    return sources, targets


def load_dates(num_examples=20000, split="train", seed=0, languages=LANGUAGES):
    """A generated corpus of dates in human formats paired with ISO 8601 dates.

    The same arguments always give the same pairs. Splits never share a date.

    Args:
        num_examples: int. Number of pairs. Defaults to 20000.
        split: str. `"train"`, `"val"` or `"test"`. Defaults to `"train"`.
        seed: int. Seed of the draw of dates and formats. Defaults to 0.
        languages: sequence of `"en"`, `"fr"`, `"de"`: languages of the month
            and weekday names. Defaults to all three.

    Returns:
        A `tf.data.Dataset` of `(human_date, iso_date)` string scalars.

    Example:

    >>> for human, iso in load_dates(3, seed=1).as_numpy_iterator():  # doctest: +SKIP
    ...     print(human.decode(), "->", iso.decode())
    """
    sources, targets = generate_dates(num_examples, split, seed, languages)
    return tf.data.Dataset.from_tensor_slices((sources, targets))
