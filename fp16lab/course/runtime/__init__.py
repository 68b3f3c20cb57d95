"""The course's run-time: what lessons and labs read, not what a learner reuses.

- :mod:`~fp16lab.course.runtime.quick`: quick mode, the one switch for problem sizes (``pick``, ``live_gpu``)
- :mod:`~fp16lab.course.runtime.results`: result files with their metadata, "measure here or show the
  committed reference" (``measure_or_reference``)
"""
