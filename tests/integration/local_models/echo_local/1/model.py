"""A tiny Python-backend model for the local integration tests: doubles its input.

Each execution sleeps a fixed time (like a real model's compute), so that under concurrency the
dynamic batcher has requests waiting and forms batches larger than 1.
"""

import json
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

    def execute(self, requests):
        time.sleep(EXEC_SECONDS)
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            out = pb_utils.Tensor("OUTPUT0", (x * 2).astype(np.float32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
