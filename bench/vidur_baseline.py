"""Vidur's side of the worker benchmark: its simulation of the headline shape, timed.

Run with a Python that has ``vidur`` (0.0.26) installed, never the project's own
environment (see bench/README.md)::

    /tmp/vidur-venv/bin/python bench/vidur_baseline.py [--requests 10000] [--json]

The shape: one replica of Llama-3-8B (the same 32 layers x 8 KV heads x 128 as the
course's gqa-8b-bf16), TP 1, PP 1, 16-token blocks, fixed 1,024 prompt + 256 output
tokens, Poisson arrivals at 4 requests/s, the Sarathi scheduler (chunked prefill) with
batch cap 128 and chunk size 512. Vidur has no prefix cache on this path.

Vidur's execution-time predictor is trained on profiling data that Vidur fetches from
a HuggingFace dataset at run time (nothing is bundled in the wheel), and this machine
reaches no such hub. So this script swaps in a STAND-IN predictor that prices a batch
with the course's synthetic cost model, registered under the type Vidur would use.
Everything else (events, scheduler, memory planner, metrics store) is Vidur's own.
The real predictor answers from precomputed tables too, but its training (sklearn
fits, cached by Vidur after the first run) and its per-operation lookups are not
measured here, so the time printed is a LOWER bound on Vidur's time for the shape.

Output writing (plots, chrome trace, metric files) is switched off and not timed:
the number is Vidur's event loop alone, as ``simulate()`` is on the worker side.
Standalone: imports vidur and the standard library only, not the project.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time

# The course's CostModel defaults (reference/shapes.py), in seconds; copied as numbers
# because this script runs in Vidur's environment, where the project is not installed.
STEP_FIXED, PER_TOKEN, PER_CONTEXT_TOKEN, PER_ATTENTION_PAIR = 0.004, 4e-05, 1e-07, 2e-09


def _cli_args(a: argparse.Namespace, out_dir: str) -> list[str]:
    return [
        "--seed", str(a.seed),
        "--replica_config_model_name", "meta-llama/Llama-3-8B",
        "--replica_config_tensor_parallel_size", "1",
        "--replica_config_num_pipeline_stages", "1",
        "--cluster_config_num_replicas", "1",
        "--replica_scheduler_config_type", "sarathi",
        "--sarathi_scheduler_config_batch_size_cap", str(a.batch_cap),
        "--sarathi_scheduler_config_chunk_size", str(a.chunk),
        "--request_generator_config_type", "synthetic",
        "--synthetic_request_generator_config_num_requests", str(a.requests),
        "--length_generator_config_type", "fixed",
        "--fixed_request_length_generator_config_prefill_tokens", str(a.prompt),
        "--fixed_request_length_generator_config_decode_tokens", str(a.output),
        "--interval_generator_config_type", "poisson",
        "--poisson_request_interval_generator_config_qps", str(a.qps),
        "--metrics_config_output_dir", out_dir,
        "--no-metrics_config_write_metrics",
        "--no-metrics_config_enable_chrome_trace",
        "--no-metrics_config_store_plots",
    ]


def _stand_in_predictor():
    """A predictor class pricing a batch with the course's cost model, spread over layers."""
    from vidur.execution_time_predictor.base_execution_time_predictor import (
        BaseExecutionTimePredictor)

    class CourseCostPredictor(BaseExecutionTimePredictor):
        batches = 0   # priced batches: Vidur's steps (one pipeline stage)

        def __init__(self, predictor_config, replica_config, cache_config, *args, **kw):
            super().__init__(predictor_config, replica_config, cache_config)

        def _step_ms_per_layer(self, batch) -> float:
            CourseCostPredictor.batches += 1
            tokens = context = pairs = 0
            for q, kv in zip(batch.num_q_tokens, batch.num_kv_tokens):
                tokens += q
                if q == 1:
                    context += kv
                else:
                    pairs += q * kv + q * (q + 1) // 2
            step = (STEP_FIXED + PER_TOKEN * tokens + PER_CONTEXT_TOKEN * context
                    + PER_ATTENTION_PAIR * pairs)
            return 1000.0 * step / self._num_layers_per_pipeline_stage   # Vidur counts ms

        def _get_mlp_layer_up_proj_execution_time(self, batch):
            return self._step_ms_per_layer(batch)

        def _zero(self, batch):
            return 0.0

        _get_attention_layer_pre_proj_execution_time = _zero
        _get_attention_layer_post_proj_execution_time = _zero
        _get_attention_rope_execution_time = _zero
        _get_attention_kv_cache_save_execution_time = _zero
        _get_attention_decode_execution_time = _zero
        _get_attention_prefill_execution_time = _zero
        _get_mlp_layer_down_proj_execution_time = _zero
        _get_mlp_layer_act_execution_time = _zero
        _get_tensor_parallel_communication_time = _zero
        _get_pipeline_parallel_communication_time = _zero
        _get_mlp_norm_layer_act_execution_time = _zero
        _get_attn_norm_layer_act_execution_time = _zero
        _get_add_layer_act_execution_time = _zero
        _get_kv_parallel_communication_time = _zero

    return CourseCostPredictor


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=10_000)
    p.add_argument("--prompt", type=int, default=1024)
    p.add_argument("--output", type=int, default=256)
    p.add_argument("--qps", type=float, default=4.0)
    p.add_argument("--batch-cap", type=int, default=128)
    p.add_argument("--chunk", type=int, default=512)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)

    os.environ.setdefault("WANDB_MODE", "disabled")
    logging.disable(logging.INFO)   # Vidur logs every phase; the timing is what we print
    try:
        from vidur.config import SimulationConfig
    except ImportError as e:
        print(f"vidur is not importable from {sys.executable} ({e}); install it into a "
              f"throwaway venv, see bench/README.md", file=sys.stderr)
        return 2
    from vidur.execution_time_predictor.execution_time_predictor_registry import (
        ExecutionTimePredictorRegistry)
    from vidur.simulator import Simulator
    from vidur.types import ExecutionTimePredictorType
    from vidur.utils.random import set_seeds

    stand_in = _stand_in_predictor()
    for kind in ExecutionTimePredictorType:
        ExecutionTimePredictorRegistry._registry[kind] = stand_in

    with tempfile.TemporaryDirectory(prefix="vidur-bench-") as out_dir:
        saved = sys.argv
        sys.argv = [saved[0], *_cli_args(a, out_dir)]
        try:
            config = SimulationConfig.create_from_cli_args()
        finally:
            sys.argv = saved
        set_seeds(config.seed)
        t0 = time.perf_counter()
        sim = Simulator(config)        # builds the cluster and generates the requests
        setup_s = time.perf_counter() - t0
        sim._write_output = lambda: None   # plots and traces are not the simulation
        c0, t0 = time.process_time(), time.perf_counter()
        sim.run()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        end_s = float(sim._time)

    result = {"tool": "vidur", "version": _version(), "predictor": "stand-in (course cost model)",
              "requests": a.requests, "setup_s": round(setup_s, 3), "simulate_s": round(wall, 3),
              "cpu_s": round(cpu, 3), "simulated_end_s": round(end_s, 3),
              "steps": stand_in.batches, "simulated_tokens": a.requests * (a.prompt + a.output)}
    if a.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k}: {v}")
    return 0


def _version() -> str:
    try:
        from importlib.metadata import version
        return version("vidur")
    except Exception:  # noqa: BLE001 - informational only
        return "?"


if __name__ == "__main__":
    sys.exit(main())
