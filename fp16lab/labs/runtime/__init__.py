"""What every lab runs on, below the labs so that labs never import the course:

- :mod:`~fp16lab.labs.runtime.quick`: quick mode, the one switch for problem sizes (``pick``, ``live_gpu``)
- :mod:`~fp16lab.labs.runtime.results`: result files with their metadata, "measure here or show the
  committed reference" (``measure_or_reference``)
- :mod:`~fp16lab.labs.runtime.verdicts`: one rule for a paired comparison (``paired_verdict``): faster, slower,
  or a tie inside the pairs' spread
- :mod:`~fp16lab.labs.runtime.metadata`: the metadata stored beside every measurement (``run_metadata``)
- :mod:`~fp16lab.labs.runtime.i18n`: the one switch (``FP16LAB_LANG``) and message catalogue for what a
  learner's run prints (hints, verdicts, banners, the doctor) in Chinese; ``i18n_hints`` holds its
  exercise hints, one block per lesson

The lessons import the first two as ``fp16lab.course.runtime.quick`` / ``.results`` (re-exports).
"""
