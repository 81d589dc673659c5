"""SGLang's model classes on CPU in a subprocess, shared by the tests that build them.

SGLANG_CPU_PRELUDE: a 1-rank gloo group (parallel_state as `ps`) and the CPU rotary path (SGLang's
RotaryEmbedding would reach for vllm's kernel unless it knows it is on CPU). Scripts add their
runtime-context publish and their model after it."""

SGLANG_CPU_PRELUDE = r"""
import socket
from sglang.srt.distributed import parallel_state as ps
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
ps.init_distributed_environment(world_size=1, rank=0, distributed_init_method=f"tcp://127.0.0.1:{port}",
                                local_rank=0, backend="gloo")
ps.initialize_model_parallel(1, backend="gloo")
import sglang.srt.layers.rotary_embedding.base as rb; rb._is_cpu = True
"""
