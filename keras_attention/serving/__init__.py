"""Export for TF Serving and CTranslate2, and request helpers for TF Serving's REST and gRPC interfaces.

`export(translator, path)` writes `path/<version>/`, a SavedModel whose
`serving_default` signature takes sentences and returns translations, with
only TensorFlow and TensorFlow Text ops inside. `requests` builds TF Serving
request bodies (REST `instances` / `inputs`, gRPC `PredictRequest`) and parses
the replies. `export_ctranslate2(translator, folder)` writes a Transformer as
a CTranslate2 model, which `CTranslate2Translator` (or `ctranslate2` alone,
on token strings) translates with.
"""

from keras_attention.serving.ctranslate2_export import export_ctranslate2
from keras_attention.serving.ctranslate2_translator import CTranslate2Translator

from keras_attention.serving import requests
from keras_attention.serving.export import (
    EXPORT_METHODS,
    IDS_SIGNATURE,
    SERVING_SIGNATURE,
    export,
)

__all__ = [
    "CTranslate2Translator", "EXPORT_METHODS", "IDS_SIGNATURE", "SERVING_SIGNATURE", "export", "export_ctranslate2",
    "requests",
]
