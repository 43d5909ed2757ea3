"""keras-attention: attention layers for Keras 3 and the models built from them."""

__version__ = "0.1.0"

# Environment variable naming the folder that holds the corpora (for example
# `multi30k/`); the data loaders look there before the Keras cache folder.
DATA_ENV_VAR = "KERAS_ATTENTION_DATA"
