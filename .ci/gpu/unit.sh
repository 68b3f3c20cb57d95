# The unit tests that touch CUDA, on the GPU, in parallel processes; log and junit to $OUT.
set -o pipefail
source .ci/gpu/setup.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee $OUT/gpu.txt
python3 -c "import torch;print(torch.__version__, torch.cuda.get_device_name())" | tee -a $OUT/gpu.txt
files=$(grep -l "cuda" tests/test_*.py | grep -v -e test_browser -e test_site -e test_signatures -e test_workshop -e test_translations -e test_outputs)
timeout ${1:-300} python3 -m pytest $files -q -n 8 -p no:cacheprovider -rfE --timeout 240 -o addopts="" 2>&1 | tee $OUT/unit.log | tail -60
