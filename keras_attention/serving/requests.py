"""Build TF Serving requests for an exported translator, and parse the replies.

REST (`POST /v1/models/<name>[/versions/<n>]:predict`) takes a JSON body in
one of two layouts: the row layout `{"instances": [...]}`, one entry a
sentence, answered by `{"predictions": [{"translations": ..., "scores": ...,
"truncated": ...}, ...]}`; and the columnar layout `{"inputs": [...]}`,
answered by `{"outputs": {"translations": [...], "scores": [...], ...}}`.
Strings that are not valid UTF-8 travel as `{"b64": "<base64>"}`. gRPC takes a
`tensorflow_serving.apis.predict_pb2.PredictRequest` (package
`tensorflow-serving-api`, the `serving` extra) on port 8500.

Both parsers return the same thing: a dict from output name to a list with
one entry a sentence (strings as `str`), e.g. `reply["translations"]`.
"""

import base64
import json

import numpy as np

from keras_attention.serving.export import IDS_SIGNATURE, SERVING_SIGNATURE

FORMATS = ("instances", "inputs")


def rest_request(sentences, format="instances", signature_name=SERVING_SIGNATURE):
    """The JSON body (a dict) of a REST predict call that translates `sentences`.

    Args:
        sentences: a str or bytes, or a list of them. Bytes that are valid
            UTF-8 are sent as text, other bytes base64-encoded.
        format: str. `"instances"` (row layout) or `"inputs"` (columnar).
            TF Serving rejects an empty `instances` list, so an empty batch
            needs `"inputs"`. Defaults to `"instances"`.
        signature_name: str. Defaults to `"serving_default"`.

    Returns:
        A dict; send it with `json.dumps(body)`.

    Example:

    >>> rest_request(["A dog runs.", b"caf\\xe9"])
    {'signature_name': 'serving_default', 'instances': ['A dog runs.', {'b64': 'Y2Fm6Q=='}]}
    """
    if isinstance(sentences, (str, bytes)):
        sentences = [sentences]
    return _body([_json_string(s) for s in sentences], format, signature_name)


def rest_ids_request(source_ids, format="instances", signature_name=IDS_SIGNATURE):
    """The JSON body of a REST predict call to the `translate_ids` signature.

    Args:
        source_ids: list of lists of int, WordPiece ids of the source
            vocabulary without [START]/[END]; rows of different lengths are
            0-padded to the longest.
        format: str. `"instances"` or `"inputs"`. Defaults to `"instances"`.
        signature_name: str. Defaults to `"translate_ids"`.
    """
    return _body(_pad(source_ids).tolist(), format, signature_name)


class ServingError(RuntimeError):
    """A REST reply that is not a translation: the server's error, or a body that cannot be read.

    Attributes:
        status: int or None. The HTTP status, when the caller passed it.
        message: str. TF Serving's error message, or what is wrong with the body.
    """

    def __init__(self, message, status=None):
        self.status, self.message = status, message
        super().__init__(f"TF Serving{f' (HTTP {status})' if status else ''}: {message}")


def parse_rest_reply(reply, status=None):
    """Columns of a REST predict reply (row or columnar layout).

    Args:
        reply: the reply body: a dict, or JSON as str or bytes.
        status: int or None. The reply's HTTP status, reported in errors.
            Defaults to None.

    Returns:
        A dict from output name to a list, one entry a sentence.

    Raises:
        ServingError: the reply is TF Serving's `{"error": ...}`, or not
            JSON, or neither layout. Its `status` and `message` say which.
    """
    if isinstance(reply, (str, bytes)):
        try:
            reply = json.loads(reply)
        except ValueError as error:  # JSONDecodeError, or bytes that are not UTF-8
            raise ServingError(f"the reply is not JSON ({error})", status) from None
    if isinstance(reply, dict) and "error" in reply:
        raise ServingError(str(reply["error"]), status)
    if not isinstance(reply, dict):
        raise ServingError(f"the reply is not a JSON object: {str(reply)[:200]}", status)
    try:
        if "predictions" in reply:
            rows = reply["predictions"]
            if rows and not isinstance(rows[0], dict):  # a single output: plain values
                rows = [{"output": row} for row in rows]
            names = rows[0].keys() if rows else ()
            return {name: [_from_json(row[name]) for row in rows] for name in names}
        if "outputs" in reply:
            outputs = reply["outputs"]
            if not isinstance(outputs, dict):
                outputs = {"output": outputs}
            return {name: _from_json(values) for name, values in outputs.items()}
    except (KeyError, TypeError, AttributeError, ValueError) as error:
        raise ServingError(f"a malformed predict reply ({type(error).__name__}: {error})", status) from None
    raise ServingError(f"a predict reply has 'predictions' or 'outputs'; this one has {sorted(reply)}", status)


def predict_request(sentences, model_name="translator", version=None, signature_name=SERVING_SIGNATURE):
    """A gRPC `PredictRequest` that translates `sentences`.

    Args:
        sentences: a str or bytes, or a list of them (str is UTF-8 encoded).
        model_name: str. The served model's name (`MODEL_NAME` of the
            `tensorflow/serving` image). Defaults to `"translator"`.
        version: int or None. A model version; None for the newest.
            Defaults to None.
        signature_name: str. Defaults to `"serving_default"`.

    Returns:
        A `tensorflow_serving.apis.predict_pb2.PredictRequest`.
    """
    import tensorflow as tf

    if isinstance(sentences, (str, bytes)):
        sentences = [sentences]
    values = [s.encode("utf-8") if isinstance(s, str) else bytes(s) for s in sentences]
    tensor = tf.make_tensor_proto(values, dtype=tf.string, shape=[len(values)])
    return _predict_request("sentences", tensor, model_name, version, signature_name)


def predict_ids_request(source_ids, model_name="translator", version=None, signature_name=IDS_SIGNATURE):
    """A gRPC `PredictRequest` for the `translate_ids` signature (rows 0-padded)."""
    import tensorflow as tf

    tensor = tf.make_tensor_proto(_pad(source_ids), dtype=tf.int32)
    return _predict_request("source_ids", tensor, model_name, version, signature_name)


def parse_predict_response(response):
    """Columns of a gRPC `PredictResponse`, like `parse_rest_reply`'s.

    Returns:
        A dict from output name to a list (rows of lists for 2-D outputs;
        strings decoded from UTF-8).
    """
    import tensorflow as tf

    columns = {}
    for name, proto in response.outputs.items():
        values = tf.make_ndarray(proto)
        if values.dtype == object:
            values = np.vectorize(lambda b: b.decode("utf-8", "replace"), otypes=[object])(values)
        columns[name] = values.tolist()
    return columns


def rest_url(host="localhost", port=8501, model_name="translator", version=None):
    """`http://host:port/v1/models/<model_name>[/versions/<version>]:predict`."""
    version_part = "" if version is None else f"/versions/{int(version)}"
    return f"http://{host}:{port}/v1/models/{model_name}{version_part}:predict"


# Helpers --------------------------------------------------------------------------


def _body(values, format, signature_name):
    if format not in FORMATS:
        raise ValueError(f"`format` must be one of {FORMATS}. Received: format={format!r}")
    if format == "instances" and not values:
        raise ValueError(
            "TF Serving rejects an empty 'instances' list: send an empty batch with "
            "format='inputs'. Received: format='instances' and no inputs"
        )
    return {"signature_name": signature_name, format: values}


def _json_string(sentence):
    """A sentence as JSON: text, or `{"b64": ...}` for bytes that are not UTF-8."""
    if isinstance(sentence, str):
        return sentence
    if not isinstance(sentence, (bytes, bytearray)):
        raise ValueError(f"`sentences` must hold str or bytes. Received: {sentence!r}")
    try:
        return bytes(sentence).decode("utf-8")
    except UnicodeDecodeError:
        return {"b64": base64.b64encode(bytes(sentence)).decode("ascii")}


def _from_json(value):
    """JSON output values back to Python: `{"b64": ...}` objects become str."""
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    if isinstance(value, dict) and set(value) == {"b64"}:
        return base64.b64decode(value["b64"]).decode("utf-8", "replace")
    return value


def _pad(source_ids):
    """A list of id lists -> an int32 array `(B, longest)`, 0-padded."""
    rows = [list(row) for row in source_ids]
    width = max((len(row) for row in rows), default=0)
    ids = np.zeros((len(rows), width), np.int32)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row
    return ids


def _predict_request(input_name, tensor, model_name, version, signature_name):
    try:
        from tensorflow_serving.apis import predict_pb2
    except ImportError as error:
        raise ImportError(
            "gRPC requests need the package tensorflow-serving-api: "
            "pip install tensorflow-serving-api (or keras-attention[serving])."
        ) from error
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = signature_name
    if version is not None:
        request.model_spec.version.value = int(version)
    request.inputs[input_name].CopyFrom(tensor)
    return request
