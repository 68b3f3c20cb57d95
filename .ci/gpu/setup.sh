# Source me: the Jupyter stack and torchao from .whl into /tmp/site (once per machine), on every Python's path
# through a .pth file (a kernel started with its own PYTHONPATH still finds them), fp16lab from this checkout.
if [ ! -f /tmp/site/.ok ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  echo /tmp/site > "$(python3 -c 'import site; print(site.getsitepackages()[0])')/zz_fp16lab_wheels.pth"
  touch /tmp/site/.ok
fi
unset MPLBACKEND  # kernels draw inline: a backend set here keeps every figure out of the stored outputs
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
export PATH=/tmp/site/bin:$PATH
python3 -m ipykernel install --user --name python3 >/dev/null 2>&1 || true
