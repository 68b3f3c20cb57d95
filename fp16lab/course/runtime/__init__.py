"""The lessons' import path for the labs' run-time, which lives in :mod:`fp16lab.labs.runtime`.

The lessons' code cells import ``fp16lab.course.runtime.quick`` and ``fp16lab.course.runtime.results``;
these two modules only re-export the labs' modules of the same names (the code exists once, below the
labs, so that labs never import the course).
"""
