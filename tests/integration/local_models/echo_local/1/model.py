"""A tiny Python-backend model for the local integration tests: doubles its input.

Each execution sleeps a fixed time (like a real model's compute), so that under concurrency the
dynamic batcher has requests waiting and forms batches larger than 1.
"""

import json
import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils

EXEC_SECONDS = 0.004


class TritonPythonModel:
    def initialize(self, args):
        self.calls = 0
        # a configuration the model itself refuses (as real models refuse bad parameters): Triton then
        # refuses the load with this message
        params = json.loads(args["model_config"]).get("parameters", {})
        if params.get("echo_local_refuse", {}).get("string_value") == "yes":
            raise pb_utils.TritonModelException(
                "echo_local: parameter echo_local_refuse=yes: refusing to load")
        # a stub process that dies while serving (as the Python backend's stubs were seen to on a GPU
        # node): on its Nth execution, once per model repository (a marker file beside this one)
        self.die_at = int(params.get("echo_local_die_at", {}).get("string_value") or 0)
        self.marker = os.path.join(os.path.dirname(__file__), "died")

    def execute(self, requests):
        self.calls += 1
        if self.die_at and self.calls >= self.die_at and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os._exit(1)
        time.sleep(EXEC_SECONDS)
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            out = pb_utils.Tensor("OUTPUT0", (x * 2).astype(np.float32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
