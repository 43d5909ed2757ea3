"""The ground floor: argument checks, option ranges, file writing, the TensorFlow-only guard,
the XLA program cache.

Every other subpackage may import from here; nothing here imports the rest of
the package, Keras or TensorFlow, so the command line can use it before
TensorFlow starts.
"""
