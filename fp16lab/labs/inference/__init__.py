"""Lesson 08's lab: FP16/BF16 inference, CUDA graphs, FP32 islands and KV-cache decoding.

- :mod:`~fp16lab.labs.inference.infer`: cast vs autocast, latency/throughput sweeps, accuracy against FP32
- :mod:`~fp16lab.labs.inference.graphs`: CUDA graphs by hand and ``torch.compile`` with their setup time
- :mod:`~fp16lab.labs.inference.islands`: keeping chosen modules in FP32
- :mod:`~fp16lab.labs.inference.decode`: KV-cache decoding as a memory-bandwidth problem
"""
