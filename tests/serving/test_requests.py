"""REST bodies and gRPC requests built by the helpers, answered as TF Serving would."""

import json
import re

import numpy as np
import pytest
import tensorflow as tf

from keras_attention.serving import requests
from tests.serving.tf_serving_emulator import grpc_predict, rest_predict

SENTENCES = ["A man in a blue shirt is riding a bike.", "", "Two dogs play in the snow .", b"bad \xff bytes"]


def _direct(signature, sentences):
    out = signature(sentences=tf.constant(sentences))
    return {
        "translations": [t.decode("utf-8") for t in out["translations"].numpy()],
        "scores": out["scores"].numpy().tolist(),
        "truncated": out["truncated"].numpy().tolist(),
    }


@pytest.mark.parametrize("format", ["instances", "inputs"])
def test_rest_body_through_the_signature(format, signatures):
    translate, translate_ids, _ = signatures["beam"]
    body = json.dumps(requests.rest_request(SENTENCES, format=format))
    reply = rest_predict({"serving_default": translate, "translate_ids": translate_ids}, body)
    parsed = requests.parse_rest_reply(reply)
    expected = _direct(translate, SENTENCES)
    assert parsed["translations"] == expected["translations"]
    np.testing.assert_allclose(parsed["scores"], expected["scores"], rtol=1e-6)
    assert parsed["truncated"] == expected["truncated"]

    ids_body = json.dumps(requests.rest_ids_request([[5, 6, 7], [8]], format=format))
    ids_reply = requests.parse_rest_reply(rest_predict({"translate_ids": translate_ids}, ids_body))
    assert np.asarray(ids_reply["tokens"]).shape == (2, translate_ids.structured_outputs["tokens"].shape[1])


def test_grpc_request_through_the_signature(signatures):
    translate, translate_ids, _ = signatures["greedy"]
    functions = {"serving_default": translate, "translate_ids": translate_ids}
    request = requests.predict_request(SENTENCES, model_name="translator", version=3)
    assert request.model_spec.name == "translator" and request.model_spec.version.value == 3
    assert request.model_spec.signature_name == "serving_default"
    parsed = requests.parse_predict_response(grpc_predict(functions, request))
    expected = _direct(translate, SENTENCES)
    assert parsed["translations"] == expected["translations"]
    np.testing.assert_allclose(parsed["scores"], expected["scores"], rtol=1e-6)

    ids_request = requests.predict_ids_request([[5, 6], [7]])
    ids = requests.parse_predict_response(grpc_predict(functions, ids_request))
    assert len(ids["tokens"]) == 2 and len(ids["lengths"]) == 2
    empty = requests.parse_predict_response(grpc_predict(functions, requests.predict_request([])))
    assert empty["translations"] == [] and empty["scores"] == []


def test_rest_body_layouts():
    body = requests.rest_request(["Hi.", b"caf\xc3\xa9", b"caf\xe9"])
    assert body == {"signature_name": "serving_default", "instances": ["Hi.", "café", {"b64": "Y2Fm6Q=="}]}
    columnar = requests.rest_request("One.", format="inputs")
    assert columnar == {"signature_name": "serving_default", "inputs": ["One."]}
    assert requests.rest_request([], format="inputs")["inputs"] == []
    assert requests.rest_ids_request([[4, 5, 6], [7]])["instances"] == [[4, 5, 6], [7, 0, 0]]
    assert requests.rest_url(version=2) == "http://localhost:8501/v1/models/translator/versions/2:predict"
    with pytest.raises(ValueError, match="format='instances'"):
        requests.rest_request([])
    with pytest.raises(ValueError, match="format='rows'"):
        requests.rest_request(["x"], format="rows")
    with pytest.raises(ValueError, match="sentences"):
        requests.rest_request([3])


def test_parse_rest_replies_of_both_layouts_and_errors():
    rows = {"predictions": [{"translations": "Ein Hund.", "scores": -1.5, "truncated": False}]}
    columns = {"outputs": {"translations": ["Ein Hund."], "scores": [-1.5], "truncated": [False]}}
    expected = {"translations": ["Ein Hund."], "scores": [-1.5], "truncated": [False]}
    assert requests.parse_rest_reply(rows) == expected
    assert requests.parse_rest_reply(json.dumps(columns).encode()) == expected
    assert requests.parse_rest_reply({"predictions": []}) == {}
    as_bytes = {"outputs": {"name_bytes": [{"b64": "Y2Fm"}]}}
    assert requests.parse_rest_reply(as_bytes) == {"name_bytes": ["caf"]}
    with pytest.raises(requests.ServingError, match=r"TF Serving \(HTTP 400\): Missing 'inputs'") as error:
        requests.parse_rest_reply('{"error": "Missing \'inputs\' or \'instances\' key"}', status=400)
    assert error.value.status == 400 and error.value.message == "Missing 'inputs' or 'instances' key"
    for bad, words in [({"result": 1}, "has 'predictions' or 'outputs'; this one has ['result']"),
                       ("<html>502 Bad Gateway</html>", "not JSON"), (b"\xff\xfe", "not JSON"),
                       ("[1, 2]", "not a JSON object"), ({"predictions": [{"a": 1}, {"b": 2}]}, "malformed"),
                       ({"outputs": {"x": [{"b64": "abc"}]}}, "malformed")]:
        with pytest.raises(requests.ServingError, match=re.escape(words)):
            requests.parse_rest_reply(bad)


def test_clients_of_the_readme_over_real_sockets(signatures):
    """The README's REST (urllib) and gRPC clients, against local stand-ins for
    the model server that answer through the exported signatures."""
    import concurrent.futures
    import http.server
    import threading
    import urllib.request

    import grpc
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    translate, translate_ids, _ = signatures["greedy"]
    functions = {"serving_default": translate, "translate_ids": translate_ids}
    expected = _direct(translate, ["A man in a blue shirt is riding a bike."])["translations"]

    class Rest(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            assert self.path == "/v1/models/translator:predict"
            reply = rest_predict(functions, self.rfile.read(int(self.headers["Content-Length"]))).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args):
            pass

    class Grpc(prediction_service_pb2_grpc.PredictionServiceServicer):
        def Predict(self, request, context):
            assert request.model_spec.name == "translator"
            return grpc_predict(functions, request)

    http_server = http.server.HTTPServer(("localhost", 0), Rest)
    threading.Thread(target=http_server.serve_forever, daemon=True).start()
    grpc_server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=1))
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(Grpc(), grpc_server)
    grpc_port = grpc_server.add_insecure_port("localhost:0")
    grpc_server.start()
    try:
        body = json.dumps(requests.rest_request(["A man in a blue shirt is riding a bike."])).encode()
        call = urllib.request.Request(
            requests.rest_url(port=http_server.server_port, model_name="translator"), data=body,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(call, timeout=60) as reply:
            assert requests.parse_rest_reply(reply.read())["translations"] == expected

        with grpc.insecure_channel(f"localhost:{grpc_port}") as channel:
            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            request = requests.predict_request(
                ["A man in a blue shirt is riding a bike."], model_name="translator"
            )
            reply = requests.parse_predict_response(stub.Predict(request, timeout=60.0))
            assert reply["translations"] == expected
    finally:
        http_server.shutdown()
        grpc_server.stop(None)


def test_the_documented_reply_has_the_layout_of_a_reply_today(signatures):
    """benchmarks/serving_reply.json (the README's example, from scripts/serving_reply.py) answers the README's
    request in the layout the beam export gives it now: one object a sentence, the same keys and types."""
    import pathlib
    import sys

    root = pathlib.Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "scripts"))
    import serving_reply

    documented = json.loads((root / "benchmarks" / "serving_reply.json").read_text(encoding="utf-8"))
    assert documented["request"] == serving_reply.REQUEST and documented["export"] == "beam"
    for page in ("README.md", "docs/serving.md"):  # the curl command whose reply the pages show sends it
        body = re.search(r"translator:predict \\\n\s+-d '(\{.*?\})'", (root / page).read_text(encoding="utf-8"))
        assert body and json.loads(body.group(1)) == serving_reply.REQUEST, page
    translate, translate_ids, _ = signatures["beam"]
    today = json.loads(rest_predict({"serving_default": translate, "translate_ids": translate_ids},
                                    json.dumps(serving_reply.REQUEST)))

    def layout(reply):
        return [{key: type(value) for key, value in row.items()} for row in reply["predictions"]]

    assert layout(documented["reply"]) == layout(today) == [{"scores": float, "translations": str,
                                                             "truncated": bool}] * 2
