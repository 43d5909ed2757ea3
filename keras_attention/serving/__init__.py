"""Export for TF Serving and request helpers for its REST and gRPC interfaces.

`export(translator, path)` writes `path/<version>/`, a SavedModel whose
`serving_default` signature takes sentences and returns translations, with
only TensorFlow and TensorFlow Text ops inside. `requests` builds TF Serving
request bodies (REST `instances` / `inputs`, gRPC `PredictRequest`) and parses
the replies.
"""

from keras_attention.serving.export import (
    EXPORT_METHODS,
    IDS_SIGNATURE,
    SERVING_SIGNATURE,
    export,
)

__all__ = ["EXPORT_METHODS", "IDS_SIGNATURE", "SERVING_SIGNATURE", "export"]
