"""Checkpoint averaging: the mean of the weights of several checkpoints of one model.

Vaswani et al. (2017, section 6.1) evaluated the average of the last 5
checkpoints of the base Transformer (20 for the big one): a cheap ensemble
that usually scores a little better than the last checkpoint alone.

Averaging works on the weight files themselves (HDF5, as Keras writes them),
with no need to rebuild the model: `.weights.h5` files (`save_weights`,
`EpochCheckpoints`, `BackupAndRestore`) and `.keras` files (`model.save`).
The model's floating-point weights are averaged; the optimizer's state and
integer values (such as the step counter) are copied from the last checkpoint
(the last `.keras` one for a `.keras` output).
"""

import io
import os
import shutil
import zipfile

import h5py
import numpy as np

from keras_attention.base.files import (check_replaceable_folder, folder_replaced_atomically, read_translator_config,
                                        replaced_atomically)

WEIGHTS_IN_KERAS_FILE = "model.weights.h5"


def average_checkpoints(paths, output, overwrite=False):
    """Write the average of the checkpoints `paths` to `output`.

    Args:
        paths: list of str. Two or more `.weights.h5` or `.keras` files of the
            same architecture (one file is allowed, and copied).
        output: str. A `.weights.h5` file, or a `.keras` file (then the last
            `.keras` among `paths` gives the model configuration).
        overwrite: bool. Replace an existing `output` (once the new file is
            complete). Defaults to False: an existing `output` is an error.

    Returns:
        `output`.

    Raises:
        ValueError: no paths, an unknown suffix, checkpoints whose weights
            differ in names or shapes, or an existing `output`.

    Example:

    >>> average_checkpoints(["epoch-009.weights.h5", "epoch-010.weights.h5"],
    ...                     "average.weights.h5")  # doctest: +SKIP
    >>> model.load_weights("average.weights.h5")  # doctest: +SKIP
    """
    paths = [os.fspath(p) for p in paths]
    output = os.fspath(output)
    _check_suffix(output)
    _check_new(output, overwrite)
    _check_not_an_input(output, paths)
    averaged = average_weights(paths)
    if output.endswith(".weights.h5"):
        with replaced_atomically(output) as partial, open(partial, "wb") as f:
            f.write(_write_weights(_weights_bytes(paths[-1]), averaged))
        return output
    templates = [p for p in paths if p.endswith(".keras")]
    if not templates:
        raise ValueError(f"A `.keras` output needs a `.keras` checkpoint for the model configuration. "
                         f"Received: output={output!r}, paths={paths}")
    replace_weights_in_keras_file(templates[-1], output, averaged)
    return output


def average_translator(translator_dir, paths, output_dir, overwrite=False):
    """Write a copy of a translator folder whose model has the average of `paths`.

    Args:
        translator_dir: str. A folder written by `Translator.save` (the model
            in `model.keras`, the vocabularies beside it).
        paths: list of str. Checkpoints of that model (`.weights.h5` or `.keras`).
        output_dir: str. The new translator folder, written whole or not at
            all.
        overwrite: bool. Replace a translator already in `output_dir` (once
            the new one is complete). Defaults to False: an error.

    Returns:
        `output_dir`, which `Translator.load` reads like the original.

    Raises:
        FileNotFoundError: `translator_dir` holds no translator.
        ValueError: the checkpoints do not fit the translator's model, or
            `output_dir` is a file, holds something other than a translator,
            or holds one and not `overwrite` (nothing is written).

    Example:

    >>> average_translator("run/translator", ["run/checkpoints/epoch-009.weights.h5",
    ...                    "run/checkpoints/epoch-010.weights.h5"], "run/translator-average")  # doctest: +SKIP
    """
    read_translator_config(translator_dir)  # a folder that is not a translator is not copied
    source = os.path.join(translator_dir, "model.keras")
    if not os.path.exists(source):
        raise FileNotFoundError(f"No translator model at {source!r}. Received: translator_dir={translator_dir!r}")
    ours = {"translator.json", "model.keras", *os.listdir(translator_dir)}  # what this command writes there

    def holds_a_translator(folder):  # and nothing else, which replacing it would delete
        names = set(os.listdir(folder))
        return "translator.json" in names and names <= ours

    check_replaceable_folder(output_dir, holds_a_translator, "translator", overwrite)
    # Before writing anything: checkpoints that do not fit the model leave `output_dir` as it was.
    members = _keras_members_with(source, average_weights(paths))
    with folder_replaced_atomically(output_dir) as staging:  # the whole translator, or nothing
        for name in os.listdir(translator_dir):
            if name != "model.keras" and os.path.isfile(os.path.join(translator_dir, name)):
                shutil.copy(os.path.join(translator_dir, name), os.path.join(staging, name))
        _write_keras_file(members, os.path.join(staging, "model.keras"))
    return output_dir


def _check_new(path, overwrite):
    if os.path.exists(path) and not overwrite:
        raise ValueError(f"{path} already exists; choose another output or pass overwrite=True (--overwrite).")


def _check_not_an_input(output, paths):
    if os.path.abspath(output) in {os.path.abspath(os.fspath(p)) for p in paths}:
        raise ValueError(f"{output} is one of the checkpoints to average; choose another output.")


def average_weights(paths):
    """The mean of the model weights of the checkpoints `paths`.

    Args:
        paths: list of str. `.weights.h5` or `.keras` files of one architecture.

    Returns:
        A dict from HDF5 dataset path to array (the optimizer's state left out),
        in the checkpoints' dtype, averaged in float64.
    """
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise ValueError("`paths` must name at least one checkpoint. Received: paths=[]")
    for path in paths:
        _check_suffix(path)
    return _mean([_read_weights(p) for p in paths], paths)


def _check_suffix(path):
    if not path.endswith((".weights.h5", ".keras")):
        raise ValueError(f"Checkpoints must be `.weights.h5` or `.keras` files. Received: {path!r}")


def replace_weights_in_keras_file(source, output, weights):
    """Copy the `.keras` file `source` to `output` with some weights replaced.

    Args:
        source, output: str. `.keras` paths.
        weights: dict from HDF5 dataset path (as in `read_weights`) to array.
            Paths missing from `source` raise a `ValueError`.
    """
    _write_keras_file(_keras_members_with(source, weights), output)


def _keras_members_with(source, weights):
    """The members (name -> bytes) of the `.keras` file `source` with `weights` in its weights file."""
    with zipfile.ZipFile(source) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    members[WEIGHTS_IN_KERAS_FILE] = _write_weights(members[WEIGHTS_IN_KERAS_FILE], weights, source)
    return members


def _write_keras_file(members, output):
    with replaced_atomically(output) as partial, zipfile.ZipFile(partial, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def read_weights(path):
    """The model weights of a checkpoint: dict from HDF5 dataset path to array.

    The optimizer's state is left out.
    """
    return {name: value for name, value in _read_weights(path).items() if _is_model_weight(name, value)}


def _read_weights(path):
    values, data = {}, _weights_bytes(path)
    try:
        f = h5py.File(io.BytesIO(data), "r")
    except OSError as error:  # h5py's message names no file
        raise ValueError(f"{path}: not a Keras weights file (HDF5: {error}).") from None
    with f:
        f.visititems(lambda name, obj: values.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
    return values


def _weights_bytes(path):
    if not os.path.exists(path):
        raise FileNotFoundError(f"No checkpoint at {path!r}")
    if path.endswith(".keras"):
        try:
            with zipfile.ZipFile(path) as archive:
                return archive.read(WEIGHTS_IN_KERAS_FILE)
        except (zipfile.BadZipFile, KeyError) as error:
            raise ValueError(f"{path}: not a valid Keras archive ({error}).") from None
    with open(path, "rb") as f:
        return f.read()


def _is_model_weight(name, value):
    return not name.startswith("optimizer/") and np.issubdtype(np.asarray(value).dtype, np.floating)


def _mean(arrays, paths):
    first = arrays[0]
    for path, other in zip(paths[1:], arrays[1:]):
        if set(other) != set(first):
            missing = sorted(set(first) ^ set(other))[:3]
            raise ValueError(f"Checkpoint {path!r} does not hold the same weights as {paths[0]!r} "
                             f"(differing names include {missing}).")
        for name, value in first.items():
            if np.shape(other[name]) != np.shape(value):
                raise ValueError(f"Weight {name!r} has shape {np.shape(other[name])} in {path!r} "
                                 f"but {np.shape(value)} in {paths[0]!r}.")
    averaged = {}
    for name, value in first.items():
        if _is_model_weight(name, value):
            total = np.sum([np.asarray(a[name], np.float64) for a in arrays], axis=0)
            averaged[name] = (total / len(arrays)).astype(np.asarray(value).dtype)
    return averaged


def _write_weights(template_bytes, weights, template="the checkpoint"):
    """`template_bytes` (an HDF5 file, from `template`) with the datasets named in `weights` overwritten."""
    buffer = io.BytesIO(template_bytes)
    with h5py.File(buffer, "r+") as f:
        for name, value in weights.items():
            if name not in f:
                raise ValueError(f"{template} has no weight {name!r} to replace: the checkpoints are of another "
                                 "model.")
            if f[name].shape != np.shape(value):
                raise ValueError(f"Weight {name!r} has shape {np.shape(value)} in the checkpoints but "
                                 f"{f[name].shape} in {template}: the checkpoints are of another model.")
            f[name][...] = value
    return buffer.getvalue()
