"""XLA programs kept on disk, so that each shape compiles once per machine, not once per run.

With XLA, TensorFlow compiles a training step or a decoding loop for every
new input shape, and forgets it when the process ends: every `train`,
`translate --jit-compile` or `evaluate --jit-compile` pays those
compilations again (for the `tiny` preset on 2,000 pairs, more than the
training itself). TensorFlow can keep the compiled programs in a folder and
load them in later processes (`--tf_xla_persistent_cache_directory` in
`TF_XLA_FLAGS`); an entry is used only when the program it was compiled from
is the same, so a changed model compiles anew.

A compiled CPU program uses the instructions of the CPU that compiled it, so
the folder holds one subfolder per TensorFlow version and CPU (its model and
instruction-set flags): a cache on a disk shared by different machines never
hands one machine another's code.

The command line uses `default_folder()` unless given `--no-xla-cache`.
TensorFlow-only (the JAX backend has its own, `jax_compilation_cache_dir`).

Example:

>>> from keras_attention.base.xla_cache import use_xla_cache
>>> folder = use_xla_cache("/tmp/xla-cache")  # before the process first compiles with XLA
"""

import hashlib
import importlib.metadata
import os
import platform

ENV_VAR = "KERAS_ATTENTION_XLA_CACHE"
FLAG = "--tf_xla_persistent_cache_directory"


def default_folder():
    """`$KERAS_ATTENTION_XLA_CACHE`, else `keras-attention/xla` in the user's cache
    folder (`$XDG_CACHE_HOME`, else `~/.cache`)."""
    if os.environ.get(ENV_VAR):
        return os.environ[ENV_VAR]
    cache_home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache_home, "keras-attention", "xla")


def machine_key():
    """`tf<version>-<12 hex digits>`: the TensorFlow version and a digest of the
    CPU's model name and instruction-set flags (from /proc/cpuinfo on Linux)."""
    try:
        version = importlib.metadata.version("tensorflow")
    except importlib.metadata.PackageNotFoundError:
        version = "none"
    cpu = platform.machine() + platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            # The first processor's lines that say what code it runs.
            cpu += "".join(sorted({line for line in f if line.split(":")[0].strip() in ("model name", "flags")}))
    except OSError:
        pass
    return f"tf{version}-{hashlib.sha256(cpu.encode()).hexdigest()[:12]}"


def use_xla_cache(folder=None):
    """Keep this process' XLA programs in `folder` (and load the ones there).

    Sets `TF_XLA_FLAGS`, which TensorFlow reads when it first compiles with
    XLA: call this before that (importing TensorFlow is fine). Without
    `folder`, a cache folder `TF_XLA_FLAGS` already names is kept.

    Args:
        folder: str. The cache folder; the programs go into its subfolder
            `machine_key()`, whatever `TF_XLA_FLAGS` names. Defaults to the
            folder `TF_XLA_FLAGS` names, else `default_folder()`.

    Returns:
        The folder the programs go to (the subfolder, or the one already in
        `TF_XLA_FLAGS`).

    Raises:
        ValueError: `folder` cannot be created (a file is in the way, or no
            permission).
    """
    flags = os.environ.get("TF_XLA_FLAGS", "").split()
    named = [flag for flag in flags if flag.startswith(FLAG + "=")]
    if named and folder is None:
        return named[-1].split("=", 1)[1]
    flags = [flag for flag in flags if flag not in named]
    folder = os.path.join(folder or default_folder(), machine_key())
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as error:
        raise ValueError(f"cannot use {folder!r} as the XLA cache folder: {error.strerror or error}") from None
    os.environ["TF_XLA_FLAGS"] = " ".join([*flags, f"{FLAG}={folder}"])
    return folder
