"""One lab per lesson topic: what a single lesson's experiments need (sweeps, tables, drivers).

Labs import the learner library (``fp16lab.train``, ``fp16lab.timing``, ...), never the reverse, and never
the course (which imports them).
A lesson imports its lab by name, so its reader knows which file to open:

- :mod:`fp16lab.labs.runtime`: what every lab runs on (quick mode, results files, run metadata, messages
  in the learner's language); the course imports it, it imports neither the course nor another lab
- :mod:`fp16lab.labs.setup`: lesson 00 (matmul throughput in interleaved rounds, the tie verdict)
- :mod:`fp16lab.labs.gradients`: lesson 01 (the fp32 MLP whose gradients are put on fp16's number line)
- :mod:`fp16lab.labs.alignment`: lesson 03 (variants timed in interleaved rounds, tie verdicts, 4090D figures)
- :mod:`fp16lab.labs.memory`: lesson 05 (tensor memory, allocator experiments, peak-memory sweeps)
- :mod:`fp16lab.labs.benchmark`: lesson 06 (the article's ResNet50 table, ``python -m fp16lab bench``)
- :mod:`fp16lab.labs.transformers`: lesson 07 (the small GPT per precision; 16-bit AdamW)
- :mod:`fp16lab.labs.inference`: lesson 08 (cast vs autocast, CUDA graphs, KV-cache decode)
- :mod:`fp16lab.labs.fp8`: lesson 09 (FP8 scaling, torchao float8 training, the raw FP8 matmul)
- :mod:`fp16lab.labs.multi_gpu`: lesson 10 (DDP, compression hooks, FSDP2)
"""
