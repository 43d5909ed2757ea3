"""Names under which keras-attention 0.2 saved layers that are Keras' own now.

A `.keras` file names each layer's class. 0.2 saved its dropout as
`keras_attention>Dropout` (a subclass of `keras.layers.Dropout` with the same
config); registering Keras' class under that name lets such files load.
`MultiHeadAttention` reads 0.2's weights itself (`load_own_variables`).
"""

import keras

keras.saving.get_custom_objects().setdefault("keras_attention>Dropout", keras.layers.Dropout)
