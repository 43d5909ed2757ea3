"""What TF Serving does with a predict request, in Python, for tests without a server.

Follows tensorflow_serving/util/json_tensor.cc (REST) and the Predict service
(gRPC): the JSON body or the `PredictRequest` becomes one tensor per
signature input, the signature runs, and its outputs are written back in the
request's layout (row: `predictions`, one object a row when there are
several outputs; columnar: `outputs`). String inputs may be `{"b64": ...}`;
string outputs are written as JSON strings unless their name ends in `_bytes`.
"""

import base64
import json

import numpy as np
import tensorflow as tf


def _input_specs(function):
    return function.structured_input_signature[1]  # {name: TensorSpec}


def _to_tensor(values, spec):
    def convert(value):
        if isinstance(value, list):
            return [convert(v) for v in value]
        if spec.dtype == tf.string:
            if isinstance(value, dict):
                assert set(value) == {"b64"}, value
                return base64.b64decode(value["b64"])
            assert isinstance(value, str), f"JSON value {value!r} is not of type DT_STRING"
            return value.encode("utf-8")
        assert isinstance(value, (int, float)) and not isinstance(value, bool), value
        return value

    array = np.array(convert(values), dtype=object if spec.dtype == tf.string else spec.dtype.as_numpy_dtype)
    return tf.constant(array, dtype=spec.dtype)


def _to_json(name, array):
    if array.dtype == object:
        as_b64 = name.endswith("_bytes")
        if as_b64:
            convert = lambda b: {"b64": base64.b64encode(b).decode()}  # noqa: E731
        else:
            convert = lambda b: b.decode("utf-8")  # noqa: E731 (strict: TF Serving writes raw bytes)
        return np.vectorize(convert, otypes=[object])(array).tolist() if array.size else array.tolist()
    return array.tolist()


def rest_predict(signatures, body):
    """The JSON reply (str) TF Serving gives to the JSON `body` (str)."""
    doc = json.loads(body)
    function = signatures[doc.get("signature_name", "serving_default")]
    specs = _input_specs(function)
    if "instances" in doc:
        rows = doc["instances"]
        if not rows:
            return json.dumps({"error": "No values in 'instances' array"})
        named = isinstance(rows[0], dict) and set(rows[0]) != {"b64"}
        columns = {n: [row[n] for row in rows] for n in specs} if named else {next(iter(specs)): rows}
        row_format = True
    else:
        inputs = doc["inputs"]
        named = isinstance(inputs, dict) and set(inputs) != {"b64"}
        columns = inputs if named else {next(iter(specs)): inputs}
        row_format = False
    outputs = function(**{n: _to_tensor(columns[n], specs[n]) for n in specs})
    outputs = {n: _to_json(n, t.numpy()) for n, t in sorted(outputs.items())}
    if not row_format:
        return json.dumps({"outputs": outputs if len(outputs) > 1 else next(iter(outputs.values()))})
    batch = len(next(iter(outputs.values())))
    if len(outputs) == 1:
        return json.dumps({"predictions": next(iter(outputs.values()))})
    return json.dumps({"predictions": [{n: v[i] for n, v in outputs.items()} for i in range(batch)]})


def grpc_predict(signatures, request):
    """The `PredictResponse` TF Serving gives to the `PredictRequest`."""
    from tensorflow_serving.apis import predict_pb2

    function = signatures[request.model_spec.signature_name or "serving_default"]
    specs = _input_specs(function)
    assert set(request.inputs) == set(specs), (set(request.inputs), set(specs))
    tensors = {n: tf.constant(tf.make_ndarray(request.inputs[n]), dtype=specs[n].dtype) for n in specs}
    response = predict_pb2.PredictResponse()
    response.model_spec.CopyFrom(request.model_spec)
    for name, tensor in function(**tensors).items():
        response.outputs[name].CopyFrom(tf.make_tensor_proto(tensor.numpy()))
    return response
