# bash .ci/gpu/lessons.sh 00 01 ...: full-mode reference runs, one lesson after another; each lesson's notebook and
# the results folder packed into /tmp/done.tgz after every lesson (so a cut-off run still returns what finished).
# In a copy: each call of the machine copies the working tree over the checkout, which would revert the notebooks
# and results that a detached run has written there before the call that brings them back.
if [ "$PWD" != /tmp/run ]; then rm -rf /tmp/run && cp -a . /tmp/run && cd /tmp/run || exit 1; fi
source .ci/gpu/setup.sh
for n in "$@"; do
  t0=$SECONDS
  python3 -m fp16lab outputs run --reference notebooks/${n}_*.ipynb > /tmp/lesson_$n.log 2>&1 && s=ok || s=FAILED
  echo "lesson $n $s $((SECONDS-t0)) s" | tee -a /tmp/lessons.txt
  tail -5 /tmp/lesson_$n.log
  tar czf /tmp/done.tmp notebooks/[0-9]*.ipynb results /tmp/lessons.txt /tmp/lesson_*.log 2>/dev/null && mv /tmp/done.tmp /tmp/done.tgz
done
