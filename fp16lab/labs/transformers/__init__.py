"""Lesson 07's lab: training and measuring the small GPT per precision, and AdamW for 16-bit weights.

- :mod:`~fp16lab.labs.transformers.lm`: excess loss, tokens/s, MFU, memory per precision
- :mod:`~fp16lab.labs.transformers.optim`: ``AdamW16`` (Kahan summation or an FP32 master copy)
"""
